"""The NVIDIA driver's CUDA version, read from NVML through ctypes.

The bootstrap runs before the app's environment exists, so it cannot use
``pynvml``: it loads NVML itself (``nvml.dll`` on Windows, ``libnvidia-ml``
elsewhere). No driver is a normal answer (CPU build), never an error.
``DDPSTUDIO_BOOTSTRAP_CUDA_DRIVER`` (or ``--cuda-driver``) replaces the
reading: "12.8" pretends a driver for CUDA 12.8, "none" pretends no driver.
That is the hardware-edge seam the tests use.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.bootstrap.cuda_index import CudaVersion
from ddpstudio.core.platform import Platform

OVERRIDE_ENV = "DDPSTUDIO_BOOTSTRAP_CUDA_DRIVER"
NVML_SUCCESS = 0


@dataclass(frozen=True)
class DriverInfo:
    """What NVML said: the CUDA version the driver supports, or why there is none."""

    cuda: CudaVersion | None
    driver_version: str | None
    state: str  # "ok", "overridden", or "not available: <why>"

    def describe(self) -> str:
        if self.cuda is None:
            return f"No NVIDIA driver found ({self.state})."
        version = f"NVIDIA driver {self.driver_version}" if self.driver_version else "NVIDIA driver"
        return f"{version}, supports CUDA {self.cuda}" + (" (overridden)" if self.state == "overridden" else "") + "."


def nvml_library_candidates(platform: Platform) -> list[str]:
    """Where NVML lives. On Windows the driver puts nvml.dll in System32; old
    drivers (before R418) only in NVSMI under Program Files."""
    if platform.is_windows:
        system_root = os.environ.get("SystemRoot", r"C:\Windows")
        program_files = os.environ.get("ProgramW6432") or os.environ.get("ProgramFiles", r"C:\Program Files")
        return [
            str(Path(system_root) / "System32" / "nvml.dll"),
            str(Path(program_files) / "NVIDIA Corporation" / "NVSMI" / "nvml.dll"),
        ]
    if platform.system == "darwin":
        return []
    return ["libnvidia-ml.so.1", "libnvidia-ml.so"]


def _load(candidates: list[str]) -> ctypes.CDLL | None:
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _read_nvml(lib: ctypes.CDLL) -> DriverInfo:
    init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
    code = init()
    if code != NVML_SUCCESS:
        return DriverInfo(None, None, f"not available: nvmlInit failed with NVML error {code}")
    try:
        encoded = ctypes.c_int(0)
        getter = getattr(lib, "nvmlSystemGetCudaDriverVersion_v2", None) or lib.nvmlSystemGetCudaDriverVersion
        code = getter(ctypes.byref(encoded))
        if code != NVML_SUCCESS or encoded.value <= 0:
            return DriverInfo(None, None, f"not available: CUDA version query failed with NVML error {code}")
        buffer = ctypes.create_string_buffer(96)
        driver = None
        if lib.nvmlSystemGetDriverVersion(buffer, ctypes.c_uint(len(buffer))) == NVML_SUCCESS:
            driver = buffer.value.decode("ascii", "replace")
        return DriverInfo(CudaVersion.from_nvml(encoded.value), driver, "ok")
    finally:
        lib.nvmlShutdown()


def parse_override(text: str) -> DriverInfo:
    """The seam's value: "none" (no driver) or a CUDA version ("12.8", "12080")."""
    if text.strip().lower() in ("none", "no", "0", "cpu"):
        return DriverInfo(None, None, "not available: overridden (no driver)")
    return DriverInfo(CudaVersion.parse(text), None, "overridden")


def detect(platform: Platform, override: str | None = None) -> DriverInfo:
    """The driver's CUDA version: from ``override``/the env seam, else NVML."""
    forced = override if override is not None else os.environ.get(OVERRIDE_ENV)
    if forced:
        return parse_override(forced)
    lib = _load(nvml_library_candidates(platform))
    if lib is None:
        return DriverInfo(None, None, "not available: NVML library not found (no NVIDIA driver installed)")
    try:
        return _read_nvml(lib)
    except (OSError, AttributeError) as exc:  # a broken or very old driver
        return DriverInfo(None, None, f"not available: {exc}")
