"""A script whose own process starts the other ranks and then trains as rank 0, as Lightning's and Fabric's
launchers do (``_SubprocessScriptLauncher``: the script again, in a new process per other rank, with torchrun's
variables; the first process becomes global rank 0). Run by itself it makes a world of --world ranks.
"""

import argparse
import os
import socket
import subprocess
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

p = argparse.ArgumentParser()
p.add_argument("--world", type=int, default=2)
p.add_argument("--steps", type=int, default=6)
args = p.parse_args()

children = []
if "LAUNCHED_RANK" not in os.environ:  # the launching process: the others first, then itself as rank 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    common = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(args.world)}
    for r in range(1, args.world):
        env = {**os.environ, **common, "RANK": str(r), "LOCAL_RANK": str(r), "LAUNCHED_RANK": str(r)}
        children.append(subprocess.Popen([sys.executable, *sys.argv], env=env))
    os.environ.update(common, RANK="0", LOCAL_RANK="0")
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(rank)
for i in range(args.steps):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {rank} step {i} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
sys.exit(max([c.wait() for c in children], default=0))
