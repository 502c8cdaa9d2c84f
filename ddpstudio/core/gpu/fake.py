"""A GPU source built from plain data: the one fake, at the hardware edge.

Tests and the ``DDPSTUDIO_FAKE_GPUS`` seam use it to model a machine with
NVIDIA GPUs (docs/gpu.md gives the JSON format). Values stay as given until
:meth:`FakeGpuSource.update` changes them, so a GUI test can move a curve.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Collection, Iterable, Mapping

from .model import NVML_OK, DriverInfo, GpuInfo, GpuSample, ProcessGpuMemory

_SAMPLE_KEYS = ("utilization_pct", "memory_used_mb", "temperature_c", "power_w")
_GPU_KEYS = frozenset({"name", "total_memory_mb", "compute_capability", "uuid", "processes", *_SAMPLE_KEYS})


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _gpu_from_dict(index: int, raw: Mapping[str, Any]) -> tuple[GpuInfo, GpuSample]:
    unknown = set(raw) - _GPU_KEYS
    if unknown:  # a typo ("utilisation_pct") would otherwise read as "not available"
        raise ValueError(f"fake GPU {index}: unknown keys {sorted(unknown)}")
    info = GpuInfo(
        index=index,
        name=str(raw["name"]),
        total_memory_mb=float(raw["total_memory_mb"]),
        compute_capability=raw.get("compute_capability"),
        uuid=raw.get("uuid", f"GPU-fake-{index}"),
    )
    processes = tuple(ProcessGpuMemory(int(p["pid"]), _number(p.get("used_mb"))) for p in raw.get("processes", ()))
    sample = GpuSample(
        index=index,
        name=info.name,
        memory_total_mb=info.total_memory_mb,
        processes=processes,
        uuid=info.uuid,
        **{key: _number(raw.get(key)) for key in _SAMPLE_KEYS},
    )
    return info, sample


class FakeGpuSource:
    """A :class:`GpuSource` whose devices and values are given, not measured.

    ``gpus`` are mappings in the JSON format of docs/gpu.md. By default the
    devices stand in for torch's (the machine "has" them); with
    ``torch_sees_gpus=False`` it models a CPU-only torch on a GPU machine.
    """

    def __init__(
        self,
        gpus: Iterable[Mapping[str, Any]] = (),
        driver_version: str | None = "555.85",
        cuda_driver_version: Iterable[int] | None = (12, 5),  # a JSON list [12, 5] works too
        nvml_state: str = NVML_OK,
        torch_sees_gpus: bool = True,
    ) -> None:
        pairs = [_gpu_from_dict(i, raw) for i, raw in enumerate(gpus)]
        cuda = None
        if cuda_driver_version is not None:
            major, minor = cuda_driver_version
            cuda = (int(major), int(minor))
        self._driver = DriverInfo(
            nvml_state=nvml_state,
            driver_version=driver_version,
            cuda_driver_version=cuda,
            gpus=tuple(info for info, _ in pairs),
            stands_in_for_torch=torch_sees_gpus,
        )
        self._samples = tuple(sample for _, sample in pairs)
        self._lock = threading.Lock()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FakeGpuSource":
        """A source from the JSON object of docs/gpu.md; unknown keys raise (TypeError, ValueError)."""
        return cls(**data)

    @classmethod
    def from_json_file(cls, path: str | Path) -> "FakeGpuSource":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def inventory(self) -> DriverInfo:
        return self._driver

    def sample(self, pids: Collection[int] | None = None) -> tuple[GpuSample, ...]:
        samples = self._samples
        if pids is None:
            return samples
        return tuple(replace(s, processes=tuple(p for p in s.processes if p.pid in pids)) for s in samples)

    def update(self, index: int, **values: Any) -> None:
        """Change one device's live values, e.g. ``update(0, utilization_pct=80)``;
        ``processes`` takes (pid, used_mb) pairs."""
        if "processes" in values:
            values["processes"] = tuple(ProcessGpuMemory(int(pid), _number(mb)) for pid, mb in values["processes"])
        with self._lock:
            samples = list(self._samples)
            samples[index] = replace(samples[index], **values)
            self._samples = tuple(samples)

    def close(self) -> None:
        """Nothing to release; here so every source can be closed the same way."""


StaticSource = FakeGpuSource  # the name the issue also uses
