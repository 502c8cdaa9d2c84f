"""A torchrun-style script that logs on rank 0 only and trains for a given number of seconds.

The other ranks print nothing at all: they are seen to join only through the
rank helper's ``rank_joined`` (issue 11: such a run used to be "rendezvous
stalled" once it ran past the rendezvous timeout).
"""

import sys
import time

import torch
import torch.distributed as dist

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
w = torch.zeros(3, requires_grad=True)
target = torch.tensor([2.0, -1.0, 0.5])
flag = torch.zeros(1)
step, t0 = 0, time.monotonic()
while True:
    flag.fill_(float(time.monotonic() - t0 >= seconds))
    dist.all_reduce(flag)  # every rank stops at the same step
    if flag.item() > 0:
        break
    step += 1
    loss = ((w - target) ** 2).sum()
    loss.backward()
    dist.all_reduce(w.grad)
    with torch.no_grad():  # SGD by hand: torch.optim's first step() imports torch._dynamo (see not_ddp.py)
        w.add_(w.grad, alpha=-0.05)
        w.grad.zero_()
    if rank == 0:
        print(f"step {step} loss: {loss.item():.5f}", flush=True)
    time.sleep(0.25)  # a few steps a second: each one is two Gloo all-reduces on every rank
dist.destroy_process_group()
