"""A script that takes ``--world-size`` and ``--rank`` as arguments but no URL: it joins by ``env://``
(``init_process_group("gloo", world_size=..., rank=...)``, MASTER_ADDR and MASTER_PORT from its environment).
Knows nothing of DDP Studio."""

import argparse

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--world-size", type=int, required=True)
parser.add_argument("--rank", type=int, required=True)
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()
dist.init_process_group("gloo", world_size=args.world_size, rank=args.rank)
for step in range(1, args.steps + 1):
    loss = torch.tensor([1.0 / step])
    dist.all_reduce(loss)
    print(f"rank {args.rank} step {step} loss {loss.item() / args.world_size:.4f}", flush=True)
dist.destroy_process_group()
