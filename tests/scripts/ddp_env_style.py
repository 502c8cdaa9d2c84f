"""A plain torchrun-style DDP script (knows nothing of DDP Studio): env://, DDP, all_reduce, print.

``STEPS [--own-hook] [--settle] [--show-ranks] [--find-unused] [--static-graph]``: ``--show-ranks`` prints
torchrun's variables first; with ``--own-hook`` it registers torch's ``allreduce_hook`` itself;
``--find-unused`` and ``--static-graph`` build DDP with ``find_unused_parameters=True`` / ``static_graph=True``;
with ``--settle`` it waits 0.1 s after ``destroy_process_group``, as a script run without the rank helper
must to avoid PyTorch's Gloo abort at exit (ddpstudio/rank/gloo_exit.py says why).

Prints the loss each step, and at the end the names of the communication
hooks its DDP model runs (none of its own), so a test can see what ran.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
own_hook = "--own-hook" in sys.argv  # register torch's reference hook, as some scripts do
settle = "--settle" in sys.argv
ddp_options = {"find_unused_parameters": "--find-unused" in sys.argv, "static_graph": "--static-graph" in sys.argv}
if "--show-ranks" in sys.argv:
    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
    print("env " + " ".join(f"{name}={os.environ.get(name, '')}" for name in names), flush=True)
dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
assert world == int(os.environ["WORLD_SIZE"])
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)), **ddp_options)
if own_hook:
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    model.register_comm_hook(None, allreduce_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(100 + rank)
x = torch.randn(64, 8, generator=g)
y = x.sum(dim=1, keepdim=True) * 0.5
for i in range(steps):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    print(f"rank {rank} step {i + 1} loss: {mean.item() / world:.6f}", flush=True)
print(f"rank {rank} comm hooks: {[hook.__name__ for hook, _ in model._comm_hooks]}", flush=True)
dist.destroy_process_group()
if settle:
    import time

    time.sleep(0.1)
