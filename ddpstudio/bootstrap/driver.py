"""The NVIDIA driver's CUDA version and each GPU's compute capability, read from NVML through ctypes.

The bootstrap runs before the app's environment exists, so it cannot use
``pynvml``: it loads NVML itself (``nvml.dll`` on Windows, ``libnvidia-ml``
elsewhere). No driver is a normal answer (CPU build), never an error.
The hardware-edge seam the tests use: ``DDPSTUDIO_BOOTSTRAP_CUDA_DRIVER``
(or ``--driver-cuda``) replaces the driver reading ("12.8" pretends a driver
for CUDA 12.8, "none" no driver), ``DDPSTUDIO_BOOTSTRAP_COMPUTE`` (or
``--compute``) the GPUs' compute capabilities ("6.1,8.9").
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.bootstrap.cuda_index import Compute, CudaVersion
from ddpstudio.core.platform import Platform

OVERRIDE_ENV = "DDPSTUDIO_BOOTSTRAP_CUDA_DRIVER"
COMPUTE_ENV = "DDPSTUDIO_BOOTSTRAP_COMPUTE"
NVML_SUCCESS = 0


@dataclass(frozen=True)
class DriverInfo:
    """What NVML said: the CUDA version the driver supports (or why there is none) and the GPUs."""

    cuda: CudaVersion | None
    driver_version: str | None
    state: str  # "ok", "overridden", or "not available: <why>"
    gpus: tuple[Compute, ...] = ()  # compute capability per GPU; empty: none or unknown
    gpu_names: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.cuda is None:
            return f"No NVIDIA driver found ({self.state})."
        version = f"NVIDIA driver {self.driver_version}" if self.driver_version else "NVIDIA driver"
        text = f"{version}, supports CUDA {self.cuda}" + (" (overridden)" if self.state == "overridden" else "")
        if self.gpus:
            names = self.gpu_names or ("GPU",) * len(self.gpus)
            text += "; " + ", ".join(f"{n} (compute {c})" for n, c in zip(names, self.gpus))
        return text + "."


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


def _declare(lib: ctypes.CDLL) -> None:
    """argtypes/restype for every NVML call (nvmlReturn_t is an int; handles are pointers)."""
    p_int, p_uint = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint)
    signatures = {
        "nvmlDeviceGetCount_v2": [p_uint],
        "nvmlDeviceGetHandleByIndex_v2": [ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)],
        "nvmlDeviceGetCudaComputeCapability": [ctypes.c_void_p, p_int, p_int],
        "nvmlDeviceGetName": [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint],
        "nvmlSystemGetDriverVersion": [ctypes.c_char_p, ctypes.c_uint],
    }
    for name, argtypes in signatures.items():
        function = getattr(lib, name, None)
        if function is not None:
            function.argtypes, function.restype = argtypes, ctypes.c_int


def _read_gpus(lib: ctypes.CDLL) -> tuple[tuple[Compute, ...], tuple[str, ...]]:
    """Every GPU's compute capability; empty when any one cannot be read (then the driver decides).
    (``ctypes.pointer`` rather than ``byref``: the same calls then also work on a test's stand-in.)"""
    count = ctypes.c_uint(0)
    if lib.nvmlDeviceGetCount_v2(ctypes.pointer(count)) != NVML_SUCCESS:
        return (), ()
    computes, names = [], []
    for index in range(count.value):
        handle = ctypes.c_void_p()
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        if lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.pointer(handle)) != NVML_SUCCESS:
            return (), ()
        if lib.nvmlDeviceGetCudaComputeCapability(handle, ctypes.pointer(major), ctypes.pointer(minor)) != NVML_SUCCESS:
            return (), ()
        name = ctypes.create_string_buffer(96)
        ok = lib.nvmlDeviceGetName(handle, name, len(name)) == NVML_SUCCESS
        computes.append(Compute(major.value, minor.value))
        names.append(name.value.decode("utf-8", "replace") if ok else f"GPU {index}")
    return tuple(computes), tuple(names)


def _read_nvml(lib: ctypes.CDLL) -> DriverInfo:
    _declare(lib)
    init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
    init.restype = ctypes.c_int
    code = init()
    if code != NVML_SUCCESS:
        return DriverInfo(None, None, f"not available: nvmlInit failed with NVML error {code}")
    try:
        encoded = ctypes.c_int(0)
        getter = getattr(lib, "nvmlSystemGetCudaDriverVersion_v2", None) or lib.nvmlSystemGetCudaDriverVersion
        getter.argtypes, getter.restype = [ctypes.POINTER(ctypes.c_int)], ctypes.c_int
        code = getter(ctypes.byref(encoded))
        if code != NVML_SUCCESS or encoded.value <= 0:
            return DriverInfo(None, None, f"not available: CUDA version query failed with NVML error {code}")
        buffer = ctypes.create_string_buffer(96)
        driver = None
        if lib.nvmlSystemGetDriverVersion(buffer, len(buffer)) == NVML_SUCCESS:
            driver = buffer.value.decode("ascii", "replace")
        gpus, names = _read_gpus(lib)
        return DriverInfo(CudaVersion.from_nvml(encoded.value), driver, "ok", gpus, names)
    finally:
        lib.nvmlShutdown()


def parse_computes(text: str) -> tuple[Compute, ...]:
    """ "6.1,8.9" -> two compute capabilities (ValueError names the bad one)."""
    return tuple(Compute.parse(part) for part in text.split(",") if part.strip())


def parse_override(text: str, computes: str | None = None) -> DriverInfo:
    """The seam's value: "none" (no driver) or a CUDA version ("12.8", "12080"), plus the GPUs."""
    if text.strip().lower() in ("none", "no", "0", "cpu"):
        return DriverInfo(None, None, "not available: overridden (no driver)")
    return DriverInfo(CudaVersion.parse(text), None, "overridden", parse_computes(computes or ""))


def detect(platform: Platform, override: str | None = None, compute: str | None = None) -> DriverInfo:
    """The driver's CUDA version and the GPUs: from the arguments/the env seam, else NVML."""
    forced = override if override is not None else os.environ.get(OVERRIDE_ENV)
    computes = compute if compute is not None else os.environ.get(COMPUTE_ENV)
    if forced:
        return parse_override(forced, computes)
    lib = _load(nvml_library_candidates(platform))
    if lib is None:
        return DriverInfo(None, None, "not available: NVML library not found (no NVIDIA driver installed)")
    try:
        info = _read_nvml(lib)
    except (OSError, AttributeError) as exc:  # a broken or very old driver
        return DriverInfo(None, None, f"not available: {exc}")
    if computes and info.cuda is not None:  # the real driver, pretended GPUs
        info = DriverInfo(info.cuda, info.driver_version, info.state, parse_computes(computes))
    return info
