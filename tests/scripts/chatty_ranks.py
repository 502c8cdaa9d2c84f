"""An args-style script whose ranks say different things, and may report steps and print them too.

Rank 0 prints the message of the DDP tutorial's example when it lacks GPUs; rank
1 prints a line of its own. With --report each step is reported through
``ddpstudio.report`` (with samples/s) and also printed as ``loss: X``, so the
studio sees it twice and must count it once (--gap S waits between the two). --rank0-only: only rank 0
prints and reports (rank-0-only logging).
"""

import argparse
import time

import torch
import torch.distributed as dist

from ddpstudio import report

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=4)
p.add_argument("--report", action="store_true")
p.add_argument("--rank0-only", action="store_true")
p.add_argument("--gap", type=float, default=0.0, help="seconds between printing a step and reporting it")
p.add_argument("--dist-url", required=True)
p.add_argument("--dist-backend", required=True)
p.add_argument("--world-size", type=int, required=True)
p.add_argument("--rank", type=int, required=True)
args = p.parse_args()

dist.init_process_group(args.dist_backend, init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
print("Unable to locate sufficient GPUs: training on the CPU instead" if args.rank == 0
      else "rank 1 has its data shard ready", flush=True)
w = torch.zeros(2, requires_grad=True)
target = torch.tensor([1.0, -1.0]) * (args.rank + 1)  # each rank its own loss: the mean is checkable
for i in range(1, args.steps + 1):
    loss = ((w - target) ** 2).sum()
    loss.backward()
    dist.all_reduce(w.grad)
    with torch.no_grad():
        w -= 0.1 * w.grad / args.world_size
        w.grad.zero_()
    if args.rank0_only and args.rank != 0:
        continue
    print(f"step {i} loss: {loss.item():.4f}", flush=True)
    if args.report:
        time.sleep(args.gap)  # the launcher reads the printed line well before the report arrives
        report.step(i, loss.item(), samples_per_s=10.0 * (args.rank + 1), total_steps=args.steps)
dist.destroy_process_group()
