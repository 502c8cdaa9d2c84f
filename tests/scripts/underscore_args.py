"""An args-style script that spells its distributed options with underscores (``--dist_url``, ``--world_size``,
``--dist_backend``) and reads ``LOCAL_RANK`` from its environment for its device, as many repositories do.

argparse does not take ``--world-size`` for ``--world_size``. Prints what it was given, then trains a few
steps. Knows nothing of DDP Studio.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--world_size", type=int, default=1)
parser.add_argument("--rank", type=int, default=0)
parser.add_argument("--dist_url", default="tcp://127.0.0.1:23456")
parser.add_argument("--dist_backend", default="nccl")
args = parser.parse_args()
local_rank = int(os.environ.get("LOCAL_RANK", 0))
dist.init_process_group(args.dist_backend, init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} local {local_rank} backend {dist.get_backend()} "
      f"url {args.dist_url.split(':')[0]}", flush=True)
model = DDP(torch.nn.Linear(3, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(1)
for step in range(1, 4):
    loss = model(torch.randn(6, 3)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
