"""A torchrun-style DDP script (knows nothing of DDP Studio) whose rank 1 hangs mid-training.

``MODE STEP``: at optimizer step STEP, rank 1 ...
- ``sleep``: sleeps for ever inside the step, between its forward and its backward;
- ``worker``: its DataLoader worker process sleeps for ever loading that step's batch, so the rank waits
  for data (the loader has one worker and no timeout, as DataLoader's defaults have it).
Rank 0 goes on into the step's gradient exchange and waits there. Prints the loss each step.
- ``compile``: not a hang. At that step every rank calls a function through ``torch.compile`` for the first
  time, with a backend that takes its time (rank 1: 9 s, rank 0: 1 s), as inductor does for nanoGPT's model
  (about a minute); then both train on, and rank 1 takes 7 s to exit after leaving its group (seen with
  torch.compile's clean-up under load).
"""

import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

MODE, STEP = sys.argv[1], int(sys.argv[2])
BATCH = 8
HANGS = os.environ["RANK"] == "1"


class Numbers(Dataset):
    """Random inputs; in rank 1's worker, the samples of batch STEP never come."""

    def __init__(self) -> None:
        self.x = torch.randn(4096, 8, generator=torch.Generator().manual_seed(0))
        self.loaded = 0  # in this process: the worker's own count

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        self.loaded += 1
        if MODE == "worker" and HANGS and self.loaded > (STEP - 1) * BATCH:
            time.sleep(1e6)  # a dead network drive, a deadlock in a decoder
        return self.x[i], self.x[i].sum(dim=0, keepdim=True)


dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = Numbers()
loader = DataLoader(data, batch_size=BATCH, sampler=DistributedSampler(data, shuffle=False),
                    num_workers=1 if MODE == "worker" else 0)


def slow_backend(graph, example_inputs):
    """A torch.compile backend (the documented ``backend=`` callable) that compiles for a while."""
    time.sleep(9 if HANGS else 1)
    return graph.forward


scaled = torch.compile(lambda t: t * 1.0, backend=slow_backend) if MODE == "compile" else None
for step, (x, y) in enumerate(loader, start=1):
    if scaled is not None and step == STEP:
        x = scaled(x)
    loss = torch.nn.functional.mse_loss(model(x), y)
    if MODE == "sleep" and HANGS and step == STEP:
        time.sleep(1e6)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {rank} step {step} loss: {loss.item():.6f}", flush=True)
dist.destroy_process_group()
if MODE == "compile" and HANGS:
    time.sleep(7)
