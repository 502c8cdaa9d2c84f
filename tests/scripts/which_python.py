"""A torchrun-style DDP script that says which Python runs it: its ``sys.prefix``, whether it can import
``ddpstudio`` through its own ``sys.path`` (not through the rank helper's finder), and its DDP model's hooks."""

import importlib.machinery
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
own = importlib.machinery.PathFinder.find_spec("ddpstudio", sys.path)  # the environment's own path, no finder
print(f"rank {rank} prefix {sys.prefix}", flush=True)
print(f"rank {rank} own ddpstudio {own is not None}", flush=True)
torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 4, generator=torch.Generator().manual_seed(rank))
for step in range(3):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {rank} step {step + 1} loss: {loss.item():.6f}", flush=True)
print(f"rank {rank} comm hooks: {[hook.__name__ for hook, _ in model._comm_hooks]}", flush=True)
dist.destroy_process_group()
