"""The real GPU source: NVIDIA's NVML through ``pynvml``, wrapped the way nvitop does it.

NVML starts on first use, not at import. A missing library or driver becomes
the state "not available: <why>" with no devices, never an exception. Each
sample reads every value of every device in one pass; a value the driver
refuses (not supported, WDDM, a lost GPU) is None and the rest still count.
"""

from __future__ import annotations

import logging
import threading
from types import ModuleType
from typing import Any, Collection

from .model import MIB, NVML_OK, DriverInfo, GpuInfo, GpuSample, ProcessGpuMemory, not_available

log = logging.getLogger(__name__)

# pynvml turns NVML_VALUE_NOT_AVAILABLE into None for process memory; older builds did not.
_NOT_AVAILABLE_ULL = 2**64 - 1

# NVML error class names (pynvml builds them as NVMLError_<Name>) in plain words.
_REASONS = {
    "NVMLError_LibraryNotFound": "the NVIDIA driver library (NVML) was not found; "
    "no NVIDIA driver is installed",
    "NVMLError_DriverNotLoaded": "the NVIDIA driver is installed but not loaded",
    "NVMLError_NoPermission": "no permission to query the NVIDIA driver",
    "NVMLError_FunctionNotFound": "the NVIDIA driver is too old for this NVML",
    "NVMLError_LibRmVersionMismatch": "the NVIDIA driver and its library do not match "
    "(a driver update needs a reboot)",
}


def describe_failure(exc: BaseException) -> str:
    """Why NVML could not start, as a "not available: ..." value."""
    reason = _REASONS.get(type(exc).__name__)
    if reason is None:
        reason = f"NVML failed to start ({type(exc).__name__}: {exc})"
    return not_available(reason)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def cuda_version_pair(encoded: int) -> tuple[int, int]:
    """NVML's CUDA version integer (12040) as (major, minor): (12, 4)."""
    return encoded // 1000, (encoded % 1000) // 10


class NvmlSource:
    """The production :class:`GpuSource`, reading NVML.

    ``nvml`` is the hardware-edge seam: any object with pynvml's function names
    (tests pass a small fake module). Left as None, ``pynvml`` is imported on
    first use; if it is not installed, that is one more "not available" reason.
    """

    def __init__(self, nvml: ModuleType | Any | None = None) -> None:
        self._nvml = nvml
        self._lock = threading.Lock()
        self._state: str | None = None  # None until the first use
        self._handles: tuple[Any, ...] = ()
        self._static: tuple[GpuInfo, ...] = ()

    @property
    def state(self) -> str:
        """"ok" or "not available: <why>"; starts NVML if it has not started yet."""
        self._start()
        assert self._state is not None
        return self._state

    def inventory(self) -> DriverInfo:
        if self.state != NVML_OK:
            return DriverInfo(nvml_state=self.state)
        encoded = self._read("nvmlSystemGetCudaDriverVersion")
        driver = self._read("nvmlSystemGetDriverVersion")
        return DriverInfo(
            nvml_state=NVML_OK,
            driver_version=None if driver is None else _text(driver),
            cuda_driver_version=None if encoded is None else cuda_version_pair(int(encoded)),
            gpus=self._static,
        )

    def sample(self, pids: Collection[int] | None = None) -> tuple[GpuSample, ...]:
        """Every device's values, read now; ``pids`` (if given) filters the process lists."""
        if self.state != NVML_OK:
            return ()
        return tuple(self._sample_device(h, info, pids) for h, info in zip(self._handles, self._static))

    def close(self) -> None:
        """Shut NVML down; a later call starts it again."""
        with self._lock:
            if self._state == NVML_OK:
                self._read("nvmlShutdown")
            self._state, self._handles, self._static = None, (), ()

    # -- internals ---------------------------------------------------------

    def _start(self) -> None:
        with self._lock:
            if self._state is not None:
                return
            if self._nvml is None:
                try:
                    import pynvml
                except ImportError:
                    self._state = not_available("the nvidia-ml-py package is not installed")
                    return
                self._nvml = pynvml
            try:
                self._nvml.nvmlInit()
            except Exception as exc:  # any NVMLError (or a broken install) means "no driver"
                self._state = describe_failure(exc)
                log.info("NVML %s", self._state)
                return
            count = self._read("nvmlDeviceGetCount") or 0
            handles = [self._read("nvmlDeviceGetHandleByIndex", i) for i in range(count)]
            pairs = [(h, self._describe(i, h)) for i, h in enumerate(handles) if h is not None]
            self._handles = tuple(h for h, _ in pairs)
            self._static = tuple(info for _, info in pairs)
            self._state = NVML_OK

    def _describe(self, index: int, handle: Any) -> GpuInfo:
        name = self._read("nvmlDeviceGetName", handle)
        memory = self._read("nvmlDeviceGetMemoryInfo", handle)
        capability = self._read("nvmlDeviceGetCudaComputeCapability", handle)
        uuid = self._read("nvmlDeviceGetUUID", handle)
        return GpuInfo(
            index=index,
            name="unknown NVIDIA GPU" if name is None else _text(name),
            total_memory_mb=0.0 if memory is None else memory.total / MIB,
            compute_capability=None if capability is None else f"{capability[0]}.{capability[1]}",
            uuid=None if uuid is None else _text(uuid),
        )

    def _sample_device(self, handle: Any, info: GpuInfo, pids: Collection[int] | None) -> GpuSample:
        utilization = self._read("nvmlDeviceGetUtilizationRates", handle)
        memory = self._read("nvmlDeviceGetMemoryInfo", handle)
        sensor = getattr(self._nvml, "NVML_TEMPERATURE_GPU", 0)
        temperature = self._read("nvmlDeviceGetTemperature", handle, sensor)
        milliwatts = self._read("nvmlDeviceGetPowerUsage", handle)
        return GpuSample(
            index=info.index,
            name=info.name,
            utilization_pct=None if utilization is None else float(utilization.gpu),
            memory_used_mb=None if memory is None else memory.used / MIB,
            memory_total_mb=None if memory is None else memory.total / MIB,
            temperature_c=None if temperature is None else float(temperature),
            power_w=None if milliwatts is None else milliwatts / 1000.0,
            processes=self._processes(handle, pids),
            uuid=info.uuid,
        )

    def _processes(self, handle: Any, pids: Collection[int] | None) -> tuple[ProcessGpuMemory, ...]:
        """Compute and graphics processes, one entry per pid (WDDM may list a rank as either)."""
        found: dict[int, float | None] = {}
        for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            for proc in self._read(getter, handle) or ():
                if pids is not None and proc.pid not in pids:
                    continue
                used = getattr(proc, "usedGpuMemory", None)
                mb = None if used is None or used == _NOT_AVAILABLE_ULL else used / MIB
                if found.get(proc.pid) is None:
                    found[proc.pid] = mb
        return tuple(ProcessGpuMemory(pid, mb) for pid, mb in sorted(found.items()))

    def _read(self, function: str, *args: Any) -> Any:
        """One NVML value, or None if the driver refuses it (one field, not the whole sample).

        A function this pynvml lacks (an old nvidia-ml-py) is refused the same way.
        """
        try:
            return getattr(self._nvml, function)(*args)
        except Exception as exc:  # NVMLError_NotSupported, _GpuIsLost, _Unknown, AttributeError
            log.debug("NVML %s failed: %s", function, exc)
            return None
