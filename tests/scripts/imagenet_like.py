"""The control flow of the PyTorch examples' ImageNet ``main.py``, with a tiny model and made-up data.

A module-level parser (positional ``data``, ``--arch``, ``--dist-url``,
``--dist-backend`` defaulting to nccl, ``--world-size``, ``--rank``,
``--multiprocessing-distributed``); ``main()`` spawns one process per
"GPU" only when that flag is given (``--procs-per-node`` stands in for the
GPU count), otherwise it is one rank of a world of ``--world-size``
processes: ``args.distributed = args.world_size > 1 or ...``, and it joins a
process group only then. Prints the example's progress lines. Knows nothing
of DDP Studio.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

parser = argparse.ArgumentParser(description="an ImageNet-shaped training script")
parser.add_argument("data", metavar="DIR", nargs="?", default="imagenet")
parser.add_argument("-a", "--arch", metavar="ARCH", default="resnet18")
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--world-size", default=-1, type=int)
parser.add_argument("--rank", default=-1, type=int)
parser.add_argument("--dist-url", default="tcp://127.0.0.1:23456", type=str)
parser.add_argument("--dist-backend", default="nccl", type=str)
parser.add_argument("--multiprocessing-distributed", action="store_true")
parser.add_argument("--procs-per-node", type=int, default=2)


def main():
    args = parser.parse_args()
    if args.dist_url == "env://" and args.world_size == -1:
        args.world_size = int(os.environ["WORLD_SIZE"])
    args.distributed = args.world_size > 1 or args.multiprocessing_distributed
    ngpus_per_node = args.procs_per_node
    if args.multiprocessing_distributed:
        args.world_size = ngpus_per_node * args.world_size
        mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
    else:
        main_worker(None, ngpus_per_node, args)


def main_worker(gpu, ngpus_per_node, args):
    if args.distributed:
        if args.multiprocessing_distributed:
            args.rank = args.rank * ngpus_per_node + gpu
        dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                                world_size=args.world_size, rank=args.rank)
    print(f"=> creating model '{args.arch}' on {args.data} (rank {max(args.rank, 0)})", flush=True)
    torch.manual_seed(0)
    model = nn.Linear(8, 2)
    if args.distributed:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, target = torch.randn(16, 8), torch.randint(0, 2, (16,))
    for i in range(args.steps):
        loss = nn.functional.cross_entropy(model(inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"Epoch: [0][{i:3d}/{args.steps}]\tLoss {loss.item():.4e} ({loss.item():.4e})", flush=True)
    if args.distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
