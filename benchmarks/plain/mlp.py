"""A plain torchrun-style DDP script with fast steps: a small MLP, hundreds of steps/s, loss printed every step.

    torchrun --nproc-per-node 2 benchmarks/plain/mlp.py [--steps 3000] [--warmup 300] [--rate-file R.json]

Written as users write them (env:// rendezvous, Gloo on the CPU, every rank
prints its loss each step) and knowing nothing of DDP Studio, so any launcher
can run it: benchmarks/plain_scripts.py compares torchrun with ``ddpstudio
run``. Rank 0 writes its steps/s after the warm-up, printing included, to
``--rate-file``: every launcher is measured the same way.
"""

import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--rate-file")
    args = p.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    for step in range(1, args.steps + 1):
        if step == args.warmup + 1:
            start = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss: {loss.item():.4f}")
    rate = (args.steps - args.warmup) / (time.perf_counter() - start)
    if dist.get_rank() == 0 and args.rate_file:
        with open(args.rate_file, "w", encoding="utf-8") as f:
            json.dump({"steps_per_s": rate}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
