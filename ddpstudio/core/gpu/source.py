"""The one door to GPU hardware: the ``GpuSource`` protocol and the default source.

Everything above this layer (inventory, sampler, CLI, GUI) reads GPUs only
through a ``GpuSource``. Production uses :class:`NvmlSource`; tests inject a
:class:`FakeGpuSource` in-process with :func:`set_source`, or in a subprocess
through ``DDPSTUDIO_FAKE_GPUS=<path to JSON>`` (docs/gpu.md).
"""

from __future__ import annotations

import os
import threading
from typing import Collection, Protocol, runtime_checkable

from .model import DriverInfo, GpuSample

FAKE_GPUS_ENV = "DDPSTUDIO_FAKE_GPUS"


@runtime_checkable
class GpuSource(Protocol):
    """Where GPU facts come from. Implementations never raise for a missing driver."""

    def inventory(self) -> DriverInfo:
        """Driver state, versions and the devices the driver sees."""
        ...

    def sample(self, pids: Collection[int] | None = None) -> tuple[GpuSample, ...]:
        """Every device's live values, read in one pass. ``pids`` (if given) keeps only
        those processes in each device's process list; None keeps them all."""
        ...

    def close(self) -> None:
        """Release the driver (NVML shutdown); the source may be used again afterwards."""
        ...


_lock = threading.Lock()
_chosen: GpuSource | None = None  # set by set_source()
_default: GpuSource | None = None  # built lazily from the environment
_default_key: str | None = None  # the DDPSTUDIO_FAKE_GPUS value _default was built for


def set_source(source: GpuSource | None) -> None:
    """Make ``source`` what :func:`get_source` returns; None goes back to the default."""
    global _chosen
    with _lock:
        _chosen = source


def get_source() -> GpuSource:
    """The process-wide source: the one set, else a fake from ``DDPSTUDIO_FAKE_GPUS``, else NVML.

    A fake file that cannot be read or parsed raises (it is a test's mistake,
    and silently showing the real hardware instead would hide it).
    """
    global _default, _default_key
    with _lock:
        if _chosen is not None:
            return _chosen
        key = os.environ.get(FAKE_GPUS_ENV) or None
        if _default is None or key != _default_key:
            _default, _default_key = _build_default(key), key
        return _default


def _build_default(fake_path: str | None) -> GpuSource:
    if fake_path:
        from .fake import FakeGpuSource

        try:
            return FakeGpuSource.from_json_file(fake_path)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{FAKE_GPUS_ENV}={fake_path!r} is not a readable fake-GPU JSON file: {exc}") from exc
    from .nvml import NvmlSource

    return NvmlSource()
