"""A torchrun-style script whose ranks end a stop differently: the way a real stop can go.

Trains "forever" (an all-reduce a step). On Ctrl+C rank 1 leaves at once; rank 0 finishes its step
first (one more all-reduce, as scripts that end an epoch cleanly do) and so meets a peer that is gone:
Gloo raises, the rank exits 1 with a traceback. Its last words are printed before that.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
step = 0
try:
    while True:
        t = torch.ones(4)
        dist.all_reduce(t)
        step += 1
        print(f"rank {rank} step {step} loss: {1.0 / step:.5f}", flush=True)
        time.sleep(0.02)
except KeyboardInterrupt:
    if rank != 0:
        sys.stdout.flush()
        os._exit(0)  # gone, no teardown (an interrupted all-reduce of its may still have paired with rank 0's)
    time.sleep(1.0)  # rank 1 is gone by now
    print("rank 0 finishing its step after the stop", flush=True)
    for _ in range(3):
        dist.all_reduce(torch.ones(4))  # raises once there is no partner: the peer closed the connection
    print("rank 0: every all-reduce after the stop succeeded (not the case this script is for)", flush=True)
