"""A script that asks for NCCL where PyTorch has none gets Gloo instead, and is told so once (issue 23 §3).

"Distributed package doesn't have NCCL built in" is the most reported Windows
multi-GPU error: the DDP tutorial series and most repositories hard-code
``init_process_group("nccl")``, and Windows builds have no NCCL
(torch/distributed/distributed_c10d.py, ``_create_nccl_process_group``:
``if not is_nccl_available(): raise RuntimeError("Distributed package doesn't
have NCCL built in")``). The rank helper (script_hooks.py) hands the backend
the script asked for to :func:`gloo_for`; only the backend changes, so a
script's ``device_ids=[rank]`` and ``cuda:N`` tensors keep their GPUs (and
the staged exchange, where the plan chose it, moves their gradients).

"No NCCL here" comes from the launcher (:data:`NO_NCCL_ENV`, set from its
Platform: Windows; or from its plan: a run on the CPU, where NCCL stops at
once with "ProcessGroupNCCL is only supported with GPUs, no GPUs found!") or
from this PyTorch itself (``is_nccl_available()``
false). The variable is also the seam the tests use on a Linux CUDA build.
"""

from __future__ import annotations

import os
from types import ModuleType

from ddpstudio.core.protocol import NO_NCCL_ENV, NO_NCCL_NO_GPU, NO_NCCL_WINDOWS

NCCL, GLOO = "nccl", "gloo"


def missing(dist: ModuleType) -> str | None:
    """Why NCCL cannot be had here, as the end of "which ... : Gloo is used instead"; None when it can."""
    if os.environ.get(NO_NCCL_ENV) == NO_NCCL_WINDOWS:
        return "Windows builds of PyTorch do not have"
    if os.environ.get(NO_NCCL_ENV) == NO_NCCL_NO_GPU:
        return "needs CUDA GPUs, and this run has none"
    if os.environ.get(NO_NCCL_ENV) or not dist.is_nccl_available():
        return "this build of PyTorch does not have"
    return None


def gloo_for(backend: object) -> str | None:
    """The backend to use instead of one that names NCCL (``nccl``, ``cuda:nccl``, ``cpu:gloo,cuda:nccl``);
    None when ``backend`` does not name it (torch's ``Backend`` values are strings)."""
    if not isinstance(backend, str) or NCCL not in backend.lower():
        return None
    text = backend.strip().lower()
    if ":" not in text:
        return GLOO if text == NCCL else None
    devices = {}
    for part in text.split(","):
        device, _, name = part.partition(":")
        devices[device.strip()] = GLOO if name.strip() == NCCL else name.strip()
    if set(devices.values()) == {GLOO}:
        return GLOO
    return ",".join(f"{device}:{name}" for device, name in devices.items())


def message(why: str) -> str:
    return f"this script asks for NCCL, which {why}: Gloo is used instead"
