"""A script written for torchrun: reads RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (env://).

``[STEPS] [--show-ranks]``: ``--show-ranks`` prints torchrun's variables first, and whether torch thinks
torchrun started it (``is_torchelastic_launched``). No DDP model: building one
costs each rank about 3 s of CPU (torch imports torch._dynamo for it); ddp_env_style.py is the script with DDP.
"""

import os
import sys

import torch
import torch.distributed as dist

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
if "--show-ranks" in sys.argv:
    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
             "GROUP_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE")
    print("env " + " ".join(f"{name}={os.environ.get(name, '')}" for name in names)
          + f" torchelastic={dist.is_torchelastic_launched()}", flush=True)
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
assert dist.get_world_size() == int(os.environ["WORLD_SIZE"])
w = torch.zeros(3, requires_grad=True)
target = torch.tensor([2.0, -1.0, 0.5])
for i in range(steps):
    loss = ((w - target) ** 2).sum()
    w.grad = None
    loss.backward()
    dist.all_reduce(w.grad)
    w.grad /= dist.get_world_size()
    # SGD by hand, as torch.optim.SGD(lr=0.1) updates (param.add_(grad, alpha=-lr)): building an optimizer imports
    # torch._dynamo (torch/optim/optimizer.py add_param_group is @torch._disable_dynamo), 2.4 s of CPU a rank.
    with torch.no_grad():
        w.add_(w.grad, alpha=-0.1)
    print(f"rank {rank} step {i + 1} loss: {loss.item():.5f}", flush=True)
dist.destroy_process_group()
