"""The immutable values the GPU layer hands out: devices, samples, snapshots.

Every field a driver may not report is ``X | None``: ``None`` means "not
available" (a missing driver, a WDDM limit, an unsupported sensor), never zero.
Memory is in MiB (2**20 bytes), the unit nvidia-smi prints as "MiB".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MIB = 1024 * 1024  # bytes in one MiB, the unit of every *_mb field
NVML_OK = "ok"
NOT_AVAILABLE = "not available"


@dataclass(frozen=True)
class GpuInfo:
    """One CUDA device: what does not change while the app runs."""

    index: int
    name: str
    total_memory_mb: float
    compute_capability: str | None  # "8.9"
    uuid: str | None = None  # "GPU-..." as NVML prints it; joins torch's and NVML's numbering


@dataclass(frozen=True)
class ProcessGpuMemory:
    """GPU memory one process holds; ``used_mb`` is None where the driver (WDDM) will not say."""

    pid: int
    used_mb: float | None


@dataclass(frozen=True)
class GpuSample:
    """One device's live values at one moment, read in one pass. ``index`` is NVML's."""

    index: int
    name: str
    utilization_pct: float | None
    memory_used_mb: float | None
    memory_total_mb: float | None
    temperature_c: float | None
    power_w: float | None
    processes: tuple[ProcessGpuMemory, ...] = ()
    uuid: str | None = None


@dataclass(frozen=True)
class ProcessSample:
    """CPU load and resident memory of one watched process (a training rank).

    ``cpu_pct`` follows psutil: 100 means one whole core, so a rank may show 250.
    The first sample of a process is 0.0 (psutil needs two readings).
    """

    pid: int
    cpu_pct: float
    rss_mb: float


@dataclass(frozen=True)
class Snapshot:
    """Everything sampled at time ``t`` (``time.time()``); ``mode`` is "gpu" or "cpu"."""

    t: float
    mode: str
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[ProcessSample, ...] = ()

    def process(self, pid: int) -> ProcessSample | None:
        """The sample for ``pid``, or None if it was not (or no longer) measured."""
        return next((p for p in self.processes if p.pid == pid), None)


@dataclass(frozen=True)
class DriverInfo:
    """What a :class:`~ddpstudio.core.gpu.source.GpuSource` reports about the driver.

    ``gpus`` are the devices the driver sees, in its own order. A fake source sets
    ``stands_in_for_torch`` so those devices count as torch's (it models a machine
    with GPUs); the real source leaves torch to say which devices it can use.
    """

    nvml_state: str
    driver_version: str | None = None
    cuda_driver_version: tuple[int, int] | None = None
    gpus: tuple[GpuInfo, ...] = ()
    stands_in_for_torch: bool = False


@dataclass(frozen=True)
class Inventory:
    """The machine as DDP Studio sees it: torch's devices merged with the driver's facts."""

    gpus: tuple[GpuInfo, ...]
    nvml_state: str  # "ok" or "not available: <reason in plain words>"
    driver_version: str | None
    cuda_driver_version: tuple[int, int] | None  # newest CUDA the driver supports, e.g. (12, 4)
    torch_version: str
    torch_cuda_version: str | None  # CUDA the torch build targets, None for a CPU-only build
    cuda_available: bool
    driver_gpus: tuple[GpuInfo, ...] = ()  # what NVML sees, even when torch cannot use it
    notes: tuple[str, ...] = field(default=())  # plain-words facts worth showing (doctor)

    @property
    def cpu_mode(self) -> bool:
        """True when there is no CUDA device torch can use: train with Gloo on the CPU."""
        return not (self.cuda_available and self.gpus)

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    def gpu_for(self, sample: GpuSample) -> GpuInfo | None:
        """The torch device a sample belongs to: by UUID, else by index when torch has no UUIDs."""
        if sample.uuid is not None:
            for gpu in self.gpus:
                if gpu.uuid == sample.uuid:
                    return gpu
            if any(gpu.uuid for gpu in self.gpus):
                return None
        return next((gpu for gpu in self.gpus if gpu.index == sample.index), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (tuples become lists), plus ``cpu_mode`` and ``gpu_count``."""
        out = asdict(self)
        for key in ("gpus", "driver_gpus", "notes"):
            out[key] = list(out[key])
        if self.cuda_driver_version is not None:
            out["cuda_driver_version"] = list(self.cuda_driver_version)
        out["cpu_mode"] = self.cpu_mode
        out["gpu_count"] = self.gpu_count
        return out


def not_available(reason: str) -> str:
    """The value for a state that could not be read, e.g. "not available: no NVIDIA driver"."""
    return f"{NOT_AVAILABLE}: {reason}"
