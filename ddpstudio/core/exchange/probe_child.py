"""The probe's child: ``python -m ddpstudio.core.exchange.probe_child STORE_PATH``.

Runs in its own process because the thing it tests may kill it (pytorch
#186535). A one-rank Gloo group on the fresh FileStore ``STORE_PATH``, then
one all-reduce of a small CUDA tensor on each visible GPU. It prints one JSON
line per step, flushed before the step, so the parent knows which GPU was
being tried when the process died:

    {"event": "cuda", "available": true, "count": 2, "torch": "2.14.1+cu130"}
    {"event": "start", "gpu": 0, "name": "NVIDIA RTX 4090"}
    {"event": "done", "gpu": 0, "ok": true, "value": [...], "expected": [...]}
    {"event": "error", "gpu": 0, "message": "RuntimeError: ..."}
"""

from __future__ import annotations

import datetime
import json
import os
import sys

MARKER = "DDPSTUDIO-PROBE "
SIZE = 8  # elements per tensor: small, but enough to see a wrong element
# Tests only, at the hardware edge: "cpu" runs the same steps on one CPU "device", so the
# store, group, all-reduce and comparison run for real on a machine without CUDA.
DEVICE_ENV = "DDPSTUDIO_PROBE_DEVICE"


def say(**fields) -> None:
    print(MARKER + json.dumps(fields), flush=True)


def main(store_path: str) -> int:
    import torch
    import torch.distributed as dist

    on_cpu = os.environ.get(DEVICE_ENV) == "cpu"
    available = on_cpu or bool(torch.cuda.is_available())
    count = 1 if on_cpu else torch.cuda.device_count() if available else 0
    say(event="cuda", available=available, count=count, torch=torch.__version__, cuda=torch.version.cuda)
    if not count:
        return 0
    store = dist.FileStore(store_path, 1)
    options = dist.ProcessGroupGloo._Options()
    # Loopback, so a VPN or Hyper-V adapter cannot break the probe (pytorch #77523).
    options._devices = [dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
    options._timeout = datetime.timedelta(seconds=30)
    group = dist.ProcessGroupGloo(store, 0, 1, options)
    for index in range(count):
        say(event="start", gpu=index, name="cpu" if on_cpu else torch.cuda.get_device_name(index))
        try:
            values = [float(index * SIZE + i + 1) for i in range(SIZE)]
            tensor = torch.tensor(values, device="cpu" if on_cpu else f"cuda:{index}")
            group.allreduce([tensor]).wait()  # the call that crashes on affected builds
            if not on_cpu:
                torch.cuda.synchronize(index)
            got = tensor.cpu().tolist()
        except Exception as exc:  # a Python error is an answer too: not "native"
            say(event="error", gpu=index, message=f"{type(exc).__name__}: {exc}".splitlines()[0])
            continue
        say(event="done", gpu=index, ok=got == values, value=got, expected=values)
    del group, store
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
