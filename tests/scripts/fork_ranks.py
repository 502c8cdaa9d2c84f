"""A script whose ranks are forked from its own process, as Lightning's ddp_fork and Accelerate's notebook_launcher
on Linux do: ``torch.multiprocessing.start_processes(..., start_method="fork")``. A forked process runs no
interpreter start-up, so the rank helper's sitecustomize does not run in it again. POSIX only."""

import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def train(rank, world_size, port, steps):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=world_size, rank=rank)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)
    for step in range(1, steps + 1):
        x = torch.randn(16, 8, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"rank {rank} pid {os.getpid()} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    print(f"script pid {os.getpid()}", flush=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(train, args=(2, port, args.steps), nprocs=2, start_method="fork")
    print("script done", flush=True)
