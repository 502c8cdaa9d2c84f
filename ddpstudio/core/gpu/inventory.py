"""The machine inventory: torch's CUDA devices merged with what the driver reports.

torch decides which devices a rank can use (its build, ``CUDA_VISIBLE_DEVICES``);
NVML adds the driver version and the newest CUDA the driver supports. Both
carry each device's UUID, which joins torch's numbering to NVML's. torch is
imported here, on the first call, so importing the GPU package stays light;
where a fake source (the test seam) stands in for torch's devices, torch is
not imported at all, its version read from its ``version.py``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from .model import MIB, DriverInfo, GpuInfo, Inventory, not_available
from .source import GpuSource, get_source



@dataclass(frozen=True)
class _TorchView:
    version: str
    cuda_version: str | None
    cuda_available: bool
    gpus: tuple[GpuInfo, ...]


def detect_inventory(source: GpuSource | None = None) -> Inventory:
    """What this machine offers for training; never raises for a missing driver or GPU.

    ``source`` defaults to :func:`get_source`. A fake source's devices stand in
    for torch's, so a test can model a GPU machine on a machine without one.
    """
    driver = (source if source is not None else get_source()).inventory()
    if driver.stands_in_for_torch:
        view = _torch_build() or _torch_view()
        gpus, cuda_available = driver.gpus, bool(driver.gpus)
    else:
        view = _torch_view()
        gpus, cuda_available = view.gpus, view.cuda_available
    return Inventory(
        gpus=gpus,
        nvml_state=driver.nvml_state,
        driver_version=driver.driver_version,
        cuda_driver_version=driver.cuda_driver_version,
        torch_version=view.version,
        torch_cuda_version=view.cuda_version,
        cuda_available=cuda_available,
        driver_gpus=driver.gpus,
        notes=_notes(view, driver, gpus),
    )


def _torch_view() -> _TorchView:
    """torch's view of CUDA, by query only: no allocation, no device change."""
    try:
        import torch
    except Exception as exc:  # on Windows a broken install fails here (a DLL that will not load)
        return _TorchView(not_available(f"torch failed to import ({exc})"), None, False, ())
    cuda_version = getattr(torch.version, "cuda", None)
    try:
        available = bool(torch.cuda.is_available())
        count = torch.cuda.device_count() if available else 0
    except Exception:  # a CUDA build with a driver it cannot use
        available, count = False, 0
    gpus = []
    for index in range(count):
        try:
            props = torch.cuda.get_device_properties(index)
        except Exception:
            continue
        uuid = getattr(props, "uuid", None)
        gpus.append(GpuInfo(
            index=index,
            name=props.name,
            total_memory_mb=props.total_memory / MIB,
            compute_capability=f"{props.major}.{props.minor}",
            uuid=None if uuid is None else _nvml_uuid(str(uuid)),
        ))
    return _TorchView(torch.__version__, cuda_version, available and bool(gpus), tuple(gpus))


def _torch_build() -> _TorchView | None:
    """torch's version and CUDA build from its ``version.py`` alone, without importing torch (3-4 s of CPU
    for a CUDA build): all that is needed of torch where a fake source stands in for its devices. None
    where that file cannot be read as expected; the caller then imports torch."""
    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            return None
        loaded = importlib.util.spec_from_file_location("_ddpstudio_torch_version",
                                                        Path(spec.origin).with_name("version.py"))
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)  # assignments and a typing import: torch's build writes it so
        version, cuda = module.__version__, module.cuda
    except Exception:  # no torch, or a version.py of another shape
        return None
    if not isinstance(version, str) or not (cuda is None or isinstance(cuda, str)):
        return None
    return _TorchView(version, cuda, False, ())


def _nvml_uuid(uuid: str) -> str:
    """torch prints a UUID bare, NVML with a "GPU-" prefix; use NVML's spelling."""
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def _notes(view: _TorchView, driver: DriverInfo, gpus: tuple[GpuInfo, ...]) -> tuple[str, ...]:
    """Facts a user should see: why there are no GPUs although the driver has some."""
    notes = []
    if driver.gpus and not gpus:
        if view.cuda_version is None:
            notes.append(f"The driver sees {len(driver.gpus)} NVIDIA GPU(s) but torch {view.version} is a "
                         "CPU-only build: install a CUDA build of torch to use them.")
        else:
            notes.append(f"The driver sees {len(driver.gpus)} NVIDIA GPU(s) but torch (built for CUDA "
                         f"{view.cuda_version}) cannot use them: is the driver new enough for that CUDA?")
    return tuple(notes)
