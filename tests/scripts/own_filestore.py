"""A script whose own code names its FileStore, as the DDP tutorial's Windows form and PyTorch's old DDP example
do: ``init_process_group("gloo", init_method="file:///" + <temp folder>/ddp_example, rank=RANK, world_size=...)``.

The rank and world size come from torchrun's variables. ``STEPS``: train that many steps (an all-reduce and a
printed loss each), or ``forever`` (until stopped). Knows nothing of DDP Studio.
"""

import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

STORE = os.path.join(tempfile.gettempdir(), "ddp_example")

rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"file://{STORE}", rank=rank, world_size=world_size)
steps = None if sys.argv[1:] == ["forever"] else int(sys.argv[1])
step = 0
while steps is None or step < steps:
    step += 1
    loss = torch.tensor([1.0 / step])
    dist.all_reduce(loss)
    print(f"step {step} loss {loss.item() / world_size:.4f}", flush=True)
    if steps is None:
        time.sleep(0.05)
dist.destroy_process_group()
