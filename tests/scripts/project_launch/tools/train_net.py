"""A project's training tool in detectron2's layout: ``python tools/train_net.py --num-gpus 2``; its launcher is in
the project's package one folder up (proj/engine/launch.py), nothing in this file starts processes."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from proj.engine import argument_parser, launch  # noqa: E402


def main(args):
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)
    for it in range(1, args.steps + 1):
        x = torch.randn(16, 8, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"rank {rank} iter: {it} loss: {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    args = argument_parser().parse_args()
    launch(main, args.num_gpus, args.dist_url, args=(args,))
