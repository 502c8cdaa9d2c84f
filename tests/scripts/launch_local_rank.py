"""A script written for ``python -m torch.distributed.launch``: a required ``--local_rank`` (Swin Transformer's
main.py declares it so), the world from ``RANK``/``WORLD_SIZE`` and ``init_process_group(backend="nccl",
init_method="env://")``. Prints what it was given and trains a few steps. Knows nothing of DDP Studio.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser("launch-style training")
parser.add_argument("--local_rank", type=int, required=True, help="local rank for DistributedDataParallel")
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()

rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group(backend="nccl", init_method="env://", world_size=world_size, rank=rank)
print(f"rank {rank} local_rank {args.local_rank} env LOCAL_RANK {os.environ['LOCAL_RANK']}", flush=True)
torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, args.steps + 1):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
