"""Which PyTorch wheel index to install from, given the NVIDIA driver.

PyPI's Windows torch wheels are CPU-only; the CUDA builds live on PyTorch's
own index, one folder per CUDA version. A build runs when the driver
supports at least its CUDA version (NVML's ``nvmlSystemGetCudaDriverVersion``
reports the newest CUDA version the driver supports). We take the newest
build the driver can run, the CPU build when there is no NVIDIA driver, and
refuse (with a plain message) when the driver is older than every build.

The table lists the CUDA builds PyTorch publishes for the pinned torch
(``pins.TORCH``); change it together with the pin. docs/install.md shows the
same table (a test keeps them equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PYTORCH_INDEX = "https://download.pytorch.org/whl"


@dataclass(frozen=True, order=True)
class CudaVersion:
    """A CUDA version such as 12.8; NVML encodes it as 12080."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> "CudaVersion":
        """Reads "12.8", "12.8.1" or NVML's integer form "12080"."""
        text = text.strip()
        match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", text)
        if match:
            return cls(int(match.group(1)), int(match.group(2)))
        if text.isdigit() and len(text) >= 4:
            return cls.from_nvml(int(text))
        raise ValueError(f"not a CUDA version: {text!r} (expected something like 12.8)")

    @classmethod
    def from_nvml(cls, encoded: int) -> "CudaVersion":
        """NVML/CUDA encode a version as 1000 * major + 10 * minor."""
        return cls(encoded // 1000, (encoded % 1000) // 10)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class TorchBuild:
    """One PyTorch build: its wheel-index folder and the CUDA it needs."""

    tag: str  # "cu130", "cu128", ..., or "cpu"
    cuda: CudaVersion | None  # None for the CPU build
    driver_series: str | None = None  # NVIDIA's driver branch for that CUDA, for messages

    @property
    def index_url(self) -> str:
        return f"{PYTORCH_INDEX}/{self.tag}"

    @property
    def uses_gpu(self) -> bool:
        return self.cuda is not None


# Newest first. Driver series from NVIDIA's CUDA release notes (R560 shipped
# with CUDA 12.6, R570 with 12.8, R580 with 13.0).
CUDA_BUILDS: tuple[TorchBuild, ...] = (
    TorchBuild("cu130", CudaVersion(13, 0), "580"),
    TorchBuild("cu128", CudaVersion(12, 8), "570"),
    TorchBuild("cu126", CudaVersion(12, 6), "560"),
)
CPU_BUILD = TorchBuild("cpu", None)


class DriverTooOld(Exception):
    """The driver supports a CUDA version older than every CUDA build we offer."""

    def __init__(self, driver_cuda: CudaVersion, oldest: TorchBuild) -> None:
        super().__init__(f"driver supports CUDA {driver_cuda}; the oldest build ({oldest.tag}) needs {oldest.cuda}")
        self.driver_cuda = driver_cuda
        self.oldest = oldest


def choose_build(driver_cuda: CudaVersion | None) -> TorchBuild:
    """The newest build the driver can run; CPU when there is no NVIDIA driver."""
    if driver_cuda is None:
        return CPU_BUILD
    for build in CUDA_BUILDS:
        assert build.cuda is not None
        if build.cuda <= driver_cuda:
            return build
    raise DriverTooOld(driver_cuda, CUDA_BUILDS[-1])


def table_markdown() -> str:
    """The choice table as Markdown, as docs/install.md shows it."""
    rows = ["| Driver supports (NVML's CUDA version) | PyTorch build | Wheel index |", "|---|---|---|"]
    newer: CudaVersion | None = None
    for build in CUDA_BUILDS:
        span = f"CUDA {build.cuda} or newer" if newer is None else f"CUDA {build.cuda} or newer, below {newer}"
        rows.append(f"| {span} (driver {build.driver_series} or newer) | `{build.tag}` | {build.index_url} |")
        newer = build.cuda
    rows.append(f"| older than CUDA {CUDA_BUILDS[-1].cuda} | none: \"driver too old\" message (or the CPU build, if the user asks) | - |")
    rows.append(f"| no NVIDIA driver | `{CPU_BUILD.tag}` | {CPU_BUILD.index_url} |")
    return "\n".join(rows)
