"""A torchrun-style script whose ranks end a stop differently: the way a real stop can go.

Trains "forever" (an all-reduce a step). Ctrl+C (the stop) only sets a flag, as scripts that stop
cleanly do, and the flag rides along in each step's all-reduce, so both ranks learn of the stop at the
same step whichever saw it first (each rank's stop watcher polls on its own clock: under load one
can see the stop a step or more before the other). Then rank 1 leaves at once; rank 0 finishes its
step first (one more all-reduce, as scripts that end an epoch cleanly do) and so meets a peer that is
gone: Gloo raises, and the error goes uncaught after the stop (the rank helper then ends the rank as
stopped). Its last words are printed before that.
"""

import os
import signal
import sys
import time

import torch
import torch.distributed as dist

stop = False


def on_stop(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGINT, on_stop)  # the stop file's interrupt calls this handler (_thread.interrupt_main)
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
step = 0
while True:
    flag = torch.tensor([1.0 if stop else 0.0])
    dist.all_reduce(flag)
    if flag.item() > 0:
        break
    step += 1
    print(f"rank {rank} step {step} loss: {1.0 / step:.5f}", flush=True)
    time.sleep(0.02)
if rank != 0:
    sys.stdout.flush()
    os._exit(0)  # gone, no teardown
time.sleep(1.0)  # rank 1 is gone by now
print("rank 0 finishing its step after the stop", flush=True)
for _ in range(3):
    dist.all_reduce(torch.ones(4))  # raises once there is no partner: the peer closed the connection
print("rank 0: every all-reduce after the stop succeeded (not the case this script is for)", flush=True)
