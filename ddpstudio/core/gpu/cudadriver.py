"""Whether torch could see a CUDA device here at all, answered without importing torch.

torch reaches an NVIDIA GPU only through the driver's CUDA library, which it loads as
``ctypes.CDLL("nvcuda.dll")`` on Windows and ``ctypes.CDLL("libcuda.so.1")`` elsewhere
(torch/cuda/_utils.py, ``_get_cuda_library``); without it ``torch.cuda.is_available()`` is False
("returns 0 if the driver is missing", torch/cuda/__init__.py, ``is_available``). Where that library
cannot be loaded, NVML sees no GPU either and torch is no ROCm build, a plan needs no torch import:
that import cost ``ddpstudio run`` 3-4 s of CPU before every run on a machine without an NVIDIA driver.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import sys
from dataclasses import dataclass

from .inventory import detect_inventory
from .model import DriverInfo
from .source import GpuSource, get_source

# What torch loads (torch/cuda/_utils.py); a test points it at a library that loads, as a driver would.
DRIVER_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


@dataclass(frozen=True)
class NoCudaMachine:
    """A machine for :func:`ddpstudio.core.policy.build_plan` where no CUDA device can exist: train on the CPU."""

    why: str
    gpu_count: int = 0
    cuda_available: bool = False


def planning_machine(source: GpuSource | None = None):
    """What a plan needs to know of the machine: :func:`detect_inventory` (which imports torch), unless no
    CUDA device can exist here, then a :class:`NoCudaMachine` saying why."""
    driver = (source if source is not None else get_source()).inventory()
    why = _no_cuda_device(driver)
    return NoCudaMachine(why) if why else detect_inventory(source)


def _no_cuda_device(driver: DriverInfo) -> str | None:
    if driver.stands_in_for_torch or driver.gpus:
        return None  # fake GPUs (the test seam) or real ones: torch decides, as always
    try:
        if "rocm" in importlib.metadata.version("torch"):
            return None  # a ROCm build reaches AMD GPUs through HIP, not the CUDA driver
    except importlib.metadata.PackageNotFoundError:
        return None  # no installed torch to ask: detect_inventory says what is wrong
    try:
        ctypes.CDLL(DRIVER_LIBRARY)
    except OSError as exc:
        return f"the NVIDIA driver's CUDA library cannot be loaded ({exc})"
    return None
