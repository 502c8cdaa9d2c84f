"""A script that starts its ranks with ``torch.multiprocessing.start_processes`` (spawn's general form).

``start_processes(fn, args, nprocs, start_method="spawn")`` runs
``fn(i, *args)`` in ``nprocs`` fresh interpreters; each joins a Gloo group
over ``MASTER_ADDR``/``MASTER_PORT`` set here. Knows nothing of DDP Studio.
"""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing


def train(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    w = torch.zeros(2, requires_grad=True)
    for step in range(1, 4):
        loss = ((w - float(rank + 1)) ** 2).sum()
        loss.backward()
        dist.all_reduce(w.grad)
        with torch.no_grad():
            w -= 0.1 * w.grad / world_size
            w.grad.zero_()
        print(f"rank {rank} step {step} loss: {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", os.environ.get("START_PROCESSES_PORT", "29511"))
    torch.multiprocessing.start_processes(train, args=(2,), nprocs=2, start_method="spawn")
