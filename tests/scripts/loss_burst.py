"""An args-style script whose ranks print many loss lines at once, as a fast training loop does.

Each rank joins a real Gloo group, all-reduces once, then prints ``step N loss: X`` for --steps steps
without pausing (a burst the launcher reads in a poll or two, however busy the machine).
"""

import argparse

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--dist-url", required=True)
p.add_argument("--dist-backend", required=True)
p.add_argument("--world-size", type=int, required=True)
p.add_argument("--rank", type=int, required=True)
args = p.parse_args()

dist.init_process_group(args.dist_backend, init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
loss = torch.tensor([float(args.rank + 1)])
dist.all_reduce(loss)
for i in range(1, args.steps + 1):
    print(f"step {i} loss: {loss.item() / i:.4f}")
dist.destroy_process_group()
