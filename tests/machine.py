"""What the machine running the tests really has, and the machine without GPUs that most tests see.

Tests marked ``real_gpus`` meet the real hardware through DDP Studio's code and compare it with what
NVML and torch say when asked directly here (:func:`nvml_answer`, :func:`torch_gpus`): the GPU path
where a GPU is present, the CPU path where none is.

Every other test exercises the CPU path (Gloo ranks on the CPU, two of them on a one-GPU machine). On
a machine with NVIDIA GPUs those tests see a machine without them through the two switches a user has
too (:func:`hide_gpus`): the GPU seam (``DDPSTUDIO_FAKE_GPUS``, docs/gpu.md) with no device and no
driver, so planning, the sampler and the probe's key agree, and ``CUDA_VISIBLE_DEVICES=""``, so torch
in every child sees no device either. The CUDA driver reads that variable once per process, when it
starts (torch/cuda/__init__.py ``is_available``: "``cudaGetDeviceCount`` which in turn initializes the
CUDA Driver API via ``cuInit``"), so the pytest process starts it with the real devices first
(:func:`has_gpus`) and keeps them for the ``real_gpus`` tests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from ddpstudio.core.gpu import FAKE_GPUS_ENV

# What a machine without an NVIDIA driver reports (docs/gpu.md's JSON for FakeGpuSource).
NO_GPU = {"gpus": [], "nvml_state": "not available: the NVIDIA driver library (NVML) was not found",
          "driver_version": None, "cuda_driver_version": None}


@dataclass(frozen=True)
class NvmlAnswer:
    """NVML asked directly (pynvml): device names and driver version; ``started`` False without a driver."""

    started: bool
    names: tuple[str, ...] = ()
    driver_version: str | None = None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@lru_cache(maxsize=1)
def nvml_answer() -> NvmlAnswer:
    try:
        import pynvml

        pynvml.nvmlInit()  # reference-counted: DDP Studio's own NvmlSource keeps its own start
    except Exception:  # NVMLError_LibraryNotFound here; no nvidia-ml-py
        return NvmlAnswer(False)
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        return NvmlAnswer(True, tuple(_text(pynvml.nvmlDeviceGetName(h)) for h in handles),
                          _text(pynvml.nvmlSystemGetDriverVersion()))
    finally:
        pynvml.nvmlShutdown()


def torch_gpus() -> tuple[str, ...]:
    """The names of the CUDA devices torch can use in this process (none on a CPU machine)."""
    import torch

    if not torch.cuda.is_available():
        return ()
    return tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))


@lru_cache(maxsize=1)
def has_gpus() -> bool:
    """Whether the driver sees NVIDIA GPUs; if so, CUDA starts here now, with the real devices."""
    if not nvml_answer().names:
        return False
    torch_gpus()
    return True


def hide_gpus(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """From now to the end of the test, this process and its children see a machine without GPUs."""
    path = folder / "no-gpu.json"
    if not path.exists():
        path.write_text(json.dumps(NO_GPU), encoding="utf-8")
    monkeypatch.setenv(FAKE_GPUS_ENV, str(path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
