"""The PyTorch examples' ImageNet script's structure (the PyTorch-on-Windows blog's command).

``--dist-url --dist-backend --world-size --rank --multiprocessing-distributed``:
with the last, it spawns one process per GPU (``--procs-per-node`` here, so
the CPU can stand in for 2 GPUs), multiplies the world size by that number
and computes ``rank = rank * ngpus_per_node + gpu`` like the example. Prints
the example's progress lines. Knows nothing of DDP Studio.
"""

import argparse
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

p = argparse.ArgumentParser()
p.add_argument("--dist-url", default="env://")
p.add_argument("--dist-backend", default="gloo")
p.add_argument("--world-size", type=int, default=-1)
p.add_argument("--rank", type=int, default=-1)
p.add_argument("--multiprocessing-distributed", action="store_true")
p.add_argument("--procs-per-node", type=int, default=torch.cuda.device_count())
p.add_argument("--steps", type=int, default=5)
p.add_argument("--pause-s", type=float, default=0.0, help="seconds per step: gives a test time to stop the run")


def main():
    args = p.parse_args()
    ngpus_per_node = args.procs_per_node
    if args.multiprocessing_distributed:
        args.world_size = ngpus_per_node * args.world_size
        mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
    else:
        main_worker(0, ngpus_per_node, args)


def main_worker(gpu, ngpus_per_node, args):
    if args.multiprocessing_distributed:
        args.rank = args.rank * ngpus_per_node + gpu
    print(f"Use GPU: {gpu} for training", flush=True)
    dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                            world_size=args.world_size, rank=args.rank)
    w = torch.zeros(4, requires_grad=True)
    target = torch.tensor([1.0, -2.0, 3.0, 0.5]) * (args.rank + 1)
    for i in range(args.steps):
        loss = ((w - target) ** 2).sum()
        loss.backward()
        dist.all_reduce(w.grad)
        w.grad /= args.world_size
        with torch.no_grad():  # SGD by hand: torch.optim's first step() imports torch._dynamo (see not_ddp.py)
            w.add_(w.grad, alpha=-0.1)
            w.grad.zero_()
        print(f"Epoch: [0][{i:3d}/{args.steps}]\tTime  0.010 ( 0.010)\tLoss {loss.item():.4e} ({loss.item():.4e})",
              flush=True)
        time.sleep(args.pause_s)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
