"""The DDP tutorial series' torchrun script, as written for Linux: ``init_process_group(backend="nccl")``.

Run by torchrun's environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``). ``--cuda`` puts the model on ``cuda:LOCAL_RANK`` with
``device_ids=[LOCAL_RANK]`` as the tutorial does; without it the tensors stay
on the CPU (this test machine). Prints the backend it got, its loss each step
and its DDP communication hooks. Knows nothing of DDP Studio.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

steps = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 5
local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group(backend="nccl")
rank = dist.get_rank()
device = torch.device(f"cuda:{local_rank}") if "--cuda" in sys.argv else torch.device("cpu")
print(f"rank {rank} backend {dist.get_backend()} device {device}", flush=True)
torch.manual_seed(0)
model = nn.Linear(6, 1).to(device)
model = DDP(model, device_ids=[local_rank]) if device.type == "cuda" else DDP(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
inputs, target = torch.randn(32, 6, device=device), torch.randn(32, 1, device=device)
for step in range(1, steps + 1):
    loss = nn.functional.mse_loss(model(inputs), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"rank {rank} step {step} loss: {loss.item():.6f}", flush=True)
print(f"rank {rank} comm hooks: {[hook.__name__ for hook, _ in model._comm_hooks]}", flush=True)
dist.destroy_process_group()
