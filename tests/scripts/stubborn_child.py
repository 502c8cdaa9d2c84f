"""A torchrun-style script whose rank starts a helper process that ignores SIGTERM (and outlives its rank)."""

import subprocess
import sys
import time

import torch.distributed as dist

CHILD = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('child up', flush=True); time.sleep(600)"
dist.init_process_group("gloo", init_method="env://")
child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "child up"
print(f"rank {dist.get_rank()} child pid {child.pid}", flush=True)
mode = sys.argv[1] if len(sys.argv) > 1 else "train"
step = 0
while mode == "train":  # until stopped
    step += 1
    print(f"step {step} loss: {1.0 / step:.4f}", flush=True)
    time.sleep(0.2)
if mode == "finish":  # one step (a run without any ends "nothing trained"), then end, leaving the child behind
    print("step 1 loss: 1.0000", flush=True)
dist.destroy_process_group()
