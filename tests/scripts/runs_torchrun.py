"""A script that runs torchrun itself, in the shape of Ultralytics' trainer: it writes its training code to a
temporary file and runs ``python -m torch.distributed.run --nproc_per_node N`` on it (ultralytics/utils/dist.py
``generate_ddp_command``, engine/trainer.py ``subprocess.run(cmd, check=True)``). It reads none of torchrun's
variables itself, so every copy of it starts a group of its own."""

import argparse
import os
import socket
import subprocess
import sys
import tempfile

WORKER = r'''
import sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

steps = int(sys.argv[1])
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(10, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
gen = torch.Generator().manual_seed(rank)
for step in range(1, steps + 1):
    x = torch.randn(16, 10, generator=gen)
    loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {rank} step {step}/{steps} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix="_ddp.py", delete=False) as fh:
        fh.write(WORKER)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(args.procs),
           "--master_port", str(free_port()), fh.name, str(args.steps)]
    try:
        subprocess.run(cmd, check=True)
    finally:
        os.unlink(fh.name)


if __name__ == "__main__":
    main()
