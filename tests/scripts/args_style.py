"""A script in the style of the PyTorch ImageNet example: distributed settings as arguments.

Knows nothing of DDP Studio; prints progress lines like the example does.
Optional: --crash-rank R --crash-step S raises on that rank at that step; --local-rank L (a template's
{local_rank}) is printed with the rank and world size first.
"""

import argparse
import sys

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
p.add_argument("--dist-url", required=True)
p.add_argument("--dist-backend", required=True)
p.add_argument("--world-size", type=int, required=True)
p.add_argument("--rank", type=int, required=True)
p.add_argument("--crash-rank", type=int, default=-1)
p.add_argument("--crash-step", type=int, default=-1)
p.add_argument("--local-rank", type=int)
args = p.parse_args()
if args.local_rank is not None:
    print(f"args rank={args.rank} local_rank={args.local_rank} world_size={args.world_size} url={args.dist_url}",
          flush=True)

dist.init_process_group(args.dist_backend, init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
torch.manual_seed(0)
w = torch.zeros(4, requires_grad=True)
target = torch.tensor([1.0, -2.0, 3.0, 0.5])
for i in range(args.steps):
    if args.rank == args.crash_rank and i == args.crash_step:
        raise ValueError(f"boom on rank {args.rank} at step {i}")
    loss = ((w - target) ** 2).sum()
    w.grad = None
    loss.backward()
    dist.all_reduce(w.grad)
    w.grad /= args.world_size
    # SGD by hand, as torch.optim.SGD(lr=0.1) updates (param.add_(grad, alpha=-lr)): building an optimizer imports
    # torch._dynamo (torch/optim/optimizer.py add_param_group is @torch._disable_dynamo), 2.4 s of CPU a rank.
    with torch.no_grad():
        w.add_(w.grad, alpha=-0.1)
    print(f"Epoch: [0][{i:3d}/{args.steps}]\tTime  0.010 ( 0.010)\tLoss {loss.item():.4e} ({loss.item():.4e})")
    sys.stdout.flush()
dist.destroy_process_group()
