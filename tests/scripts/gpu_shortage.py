"""A script that gives up before it starts, the way PyTorch examples' ``distributed/ddp/example.py`` does
without enough GPUs: it prints why and exits 0, never calling ``init_process_group``."""

import os
import sys

import torch

needed = int(os.environ.get("WORLD_SIZE", "2"))
if torch.cuda.device_count() < needed:
    print(f"Unable to locate sufficient {needed} gpus to run this example. Exiting.", flush=True)
    sys.exit(0)
print("enough GPUs: this test machine was not meant to have them", flush=True)
