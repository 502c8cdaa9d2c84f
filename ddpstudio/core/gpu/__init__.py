"""GPU inventory and live sampling, Qt-free (docs/gpu.md).

The only way to GPU hardware is a :class:`GpuSource`: :class:`NvmlSource` in
production, :class:`FakeGpuSource` in tests. Importing this package loads
neither torch nor NVML; both start on first use.
"""

from .fake import FakeGpuSource, StaticSource
from .inventory import detect_inventory
from .model import (
    NOT_AVAILABLE,
    NVML_OK,
    DriverInfo,
    GpuInfo,
    GpuSample,
    Inventory,
    ProcessGpuMemory,
    ProcessSample,
    Snapshot,
)
from .nvml import NvmlSource
from .sampler import Sampler
from .source import FAKE_GPUS_ENV, GpuSource, get_source, set_source

__all__ = [
    "FAKE_GPUS_ENV",
    "NOT_AVAILABLE",
    "NVML_OK",
    "DriverInfo",
    "FakeGpuSource",
    "GpuInfo",
    "GpuSample",
    "GpuSource",
    "Inventory",
    "NvmlSource",
    "ProcessGpuMemory",
    "ProcessSample",
    "Sampler",
    "Snapshot",
    "StaticSource",
    "detect_inventory",
    "get_source",
    "set_source",
]
