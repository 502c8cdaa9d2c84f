"""An args-style script that says what it was given: its arguments and its distributed environment.

Prints one line ``SEEN {json}`` (argv, the parsed --dist-* values as argparse keeps them, and RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES), then joins the process
group the way its arguments say (``env://`` included) over Gloo on the CPU, all-reduces its rank
and prints ``sum N`` and one loss line.
"""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--dist-url", required=True)
p.add_argument("--dist-backend", default="gloo")
p.add_argument("--world-size", type=int, required=True)
p.add_argument("--rank", type=int, required=True)
p.add_argument("--local-rank", type=int)
p.add_argument("--gpu", type=int)
args = p.parse_args()

names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES")
seen = {"argv": sys.argv[1:], "args": vars(args), "env": {n: os.environ.get(n) for n in names}}
print("SEEN " + json.dumps(seen), flush=True)
# The ranks meet as their arguments say; Gloo on the CPU whatever the plan's device (no GPU here).
dist.init_process_group("gloo", init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
total = torch.tensor([float(args.rank)])
dist.all_reduce(total)
print(f"sum {int(total.item())}", flush=True)
print("step 1 loss: 1.0", flush=True)
dist.destroy_process_group()
