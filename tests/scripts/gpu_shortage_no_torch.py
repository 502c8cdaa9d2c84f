"""A wrapper that gives up before importing anything: it needs 2 GPUs, finds fewer in
``CUDA_VISIBLE_DEVICES``, prints why and exits 0. torch is never imported, so no process group either."""

import os
import sys

needed = 2
visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
if len(visible) < needed:
    print(f"Unable to locate sufficient {needed} gpus to run this example. Exiting.", flush=True)
    sys.exit(0)
import torch  # noqa: E402  (never reached here)

print(f"{torch.cuda.device_count()} GPUs: this test machine was not meant to have them", flush=True)
