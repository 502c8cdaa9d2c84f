"""The script's set-up module, as timm's ``utils.init_distributed_device``: it reads torchrun's variables here,
not in the script, so nothing in train.py itself says torchrun."""

import os

import torch.distributed as dist


def init_distributed(args) -> None:
    args.world_size = int(os.environ.get("WORLD_SIZE", "1"))
    args.rank = int(os.environ.get("RANK", "0"))
    if args.world_size > 1:
        dist.init_process_group("gloo")
