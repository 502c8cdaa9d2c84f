"""What the probe's answer depends on: torch build, driver version, GPU set.

Read cheaply, so asking "is the cached answer still valid?" costs no torch
import: the torch version comes from the installed distribution's metadata,
the CUDA build from ``torch/version.py`` read as text, the driver and the
GPUs from the GPU source (NVML, or the ``DDPSTUDIO_FAKE_GPUS`` seam).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_FIELD_LINE = r"""^{name}\b[^=]*=\s*['"]([^'"]+)['"]"""


@dataclass(frozen=True)
class ProbeKey:
    torch: str | None  # "2.14.1+cu130"
    cuda_build: str | None  # "13.0"; None for a CPU-only build
    driver: str | None  # "576.02"; None without an NVIDIA driver
    gpus: tuple[str, ...] = ()  # each GPU's UUID (or name when the driver gives none)

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), gpus=list(self.gpus))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeKey:
        return cls(data.get("torch"), data.get("cuda_build"), data.get("driver"), tuple(data.get("gpus") or ()))


def torch_version() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def _version_py() -> str | None:
    """The text of the installed ``torch/version.py`` (finding a package does not run it); None without torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            return (Path(folder) / "version.py").read_text(encoding="utf-8")
        except OSError:
            continue
    return None


def _build_field(text: str | None, name: str) -> str | None:
    found = re.search(_FIELD_LINE.format(name=name), text or "", re.MULTILINE)
    return found.group(1) if found else None


def torch_cuda_build() -> str | None:
    """``torch.version.cuda`` without importing torch."""
    return _build_field(_version_py(), "cuda")


def cpu_only_build() -> bool:
    """Whether the installed torch is built for neither CUDA nor ROCm (``torch.version.cuda`` and ``.hip``
    are None, as in PyPI's Windows wheels): then ``torch.cuda.is_available()`` is False on any machine
    (torch/cuda/__init__.py ``is_available``: ``if not _is_compiled(): return False``). A ROCm build sets
    only ``hip`` and does use ``torch.cuda``."""
    text = _version_py()
    return text is not None and _build_field(text, "cuda") is None and _build_field(text, "hip") is None


def current_key(source=None) -> ProbeKey:
    """This machine's key now. ``source`` defaults to :func:`ddpstudio.core.gpu.get_source`."""
    from ddpstudio.core.gpu.source import get_source

    driver = (source if source is not None else get_source()).inventory()
    return ProbeKey(torch_version(), torch_cuda_build(), driver.driver_version,
                    tuple(g.uuid or g.name for g in driver.gpus))


def key_for(inventory) -> ProbeKey:
    """The key of an :class:`~ddpstudio.core.gpu.Inventory` already taken (the window has one)."""
    return ProbeKey(torch_version(), torch_cuda_build(), inventory.driver_version,
                    tuple(g.uuid or g.name for g in inventory.driver_gpus))
