"""The official "Getting Started with DDP" tutorial's structure: the script spawns its own ranks.

``mp.spawn(demo_basic, args=(world_size,), nprocs=world_size)`` with
``MASTER_ADDR``/``MASTER_PORT`` set inside the script (the tutorial
hard-codes 12355; the tests pass a port through ``TUTORIAL_PORT``). A tiny
model, Gloo on the CPU, ``loss: X`` printed per step on every rank. Each rank
trains towards a different target, so their losses tell them apart.
Knows nothing of DDP Studio.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

PORT = os.environ.get("TUTORIAL_PORT", "12355")
STEPS = int(os.environ.get("TUTORIAL_STEPS", "5"))
PAUSE_S = float(os.environ.get("TUTORIAL_PAUSE_S", "0"))  # per step: gives a test time to stop the run


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = PORT
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def demo_basic(rank, world_size):
    print(f"Running basic DDP example on rank {rank}.", flush=True)
    setup(rank, world_size)
    torch.manual_seed(0)
    model = DDP(nn.Linear(10, 5))
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs, labels = torch.randn(20, 10), torch.full((20, 5), 10.0 * (rank + 1))
    for step in range(1, STEPS + 1):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()
        print(f"rank {rank} step {step} loss: {loss.item():.4f}", flush=True)
        print(f"rank {rank} note on stderr", file=sys.stderr, flush=True)
        time.sleep(PAUSE_S)
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = 2
    mp.spawn(demo_basic, args=(world_size,), nprocs=world_size, join=True)
