"""Which PyTorch build to install, given the NVIDIA driver and every GPU.

PyPI's Windows torch wheels are CPU-only; the CUDA builds live on PyTorch's
own index, one folder per CUDA version, and the set changes per release
(torch 2.14 publishes cu126, cu130 and cu132: pytorch PR #194367,
googlecolab/colabtools #6093; cu128 went after 2.11: colabtools #5982).
Two things decide whether a build runs:

* the driver: NVML's ``nvmlSystemGetCudaDriverVersion`` is the newest CUDA
  the driver supports. A build runs when that is at least its CUDA version,
  or, by CUDA minor-version compatibility, when the driver is of the same
  CUDA major and at least that major's floor (NVIDIA: CUDA 12.x needs
  driver >= 525, CUDA 13.x >= 580). Minor-version compatibility runs "with
  limited feature-set", so a build the driver supports outright is preferred;
* each GPU's compute capability: a build has kernels (SASS) for a list of
  architectures, and a kernel for X.Y also runs on X.Z with Z >= Y. PyTorch's
  Windows wheels carry no PTX, so nothing else runs (cu130+ has no Maxwell,
  Pascal or Volta kernels, pytorch #172352; cu126 none for Blackwell).

:func:`choose` picks the newest build that runs on the driver and on all
GPUs, and says why in words. The table is data (:data:`BUILDS_BY_TORCH`);
change it together with the pin. docs/install.md shows it (a test keeps
them equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ddpstudio.bootstrap.pins import TORCH

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


@dataclass(frozen=True, order=True)
class Compute:
    """A GPU's compute capability (NVML ``nvmlDeviceGetCudaComputeCapability``)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> "Compute":
        match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
        if not match:
            raise ValueError(f"not a compute capability: {text!r} (expected something like 8.9)")
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def family(self) -> str:
        names = {3: "Kepler", 5: "Maxwell", 6: "Pascal", 8: "Ampere", 9: "Hopper", 10: "Blackwell", 11: "Blackwell", 12: "Blackwell"}
        if self.major == 7:
            return "Turing" if self.minor >= 5 else "Volta"
        if (self.major, self.minor) == (8, 9):
            return "Ada"
        return names.get(self.major, "unknown architecture")

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def _computes(*texts: str) -> tuple[Compute, ...]:
    return tuple(Compute.parse(t) for t in texts)


@dataclass(frozen=True)
class TorchBuild:
    """One PyTorch build: its wheel-index folder, its CUDA, its kernels, its driver floor."""

    tag: str  # "cu132", "cu130", "cu126" or "cpu"
    cuda: CudaVersion | None  # None for the CPU build
    kernels: tuple[Compute, ...] = ()  # architectures with SASS in the wheel
    floor: CudaVersion | None = None  # the oldest driver CUDA version that runs it
    floor_series: str | None = None  # NVIDIA's driver branch for the floor, for messages

    @property
    def index_url(self) -> str:
        return f"{PYTORCH_INDEX}/{self.tag}"

    @property
    def uses_gpu(self) -> bool:
        return self.cuda is not None

    def runs_gpu(self, gpu: Compute) -> bool:
        """A kernel for X.Y runs on X.Z with Z >= Y (same major); no PTX on Windows."""
        return any(k.major == gpu.major and k.minor <= gpu.minor for k in self.kernels)

    def runs_driver(self, driver: CudaVersion) -> bool:
        assert self.cuda is not None and self.floor is not None
        return driver >= self.cuda or (driver.major == self.cuda.major and driver >= self.floor)

    def needs_minor_compat(self, driver: CudaVersion) -> bool:
        assert self.cuda is not None
        return driver < self.cuda


# From PyTorch's CUDA support matrix for "Linux x86_64 and Windows"
# (pytorch #190355, RELEASE.md via PR #194367): 12.6: Maxwell(5.0), Pascal(6.0),
# Volta(7.0), Turing(7.5), Ampere(8.0, 8.6), Hopper(9.0); 13.0 and 13.2:
# Turing(7.5), Ampere(8.0, 8.6), Hopper(9.0), Blackwell(10.0, 12.0), "+PTX
# available on linux builds only". Floors: NVIDIA's minor-version table.
_CU12 = dict(floor=CudaVersion(12, 0), floor_series="525")
_CU13 = dict(floor=CudaVersion(13, 0), floor_series="580")
BUILDS_BY_TORCH: dict[str, tuple[TorchBuild, ...]] = {
    "2.14.1": (  # newest first
        TorchBuild("cu132", CudaVersion(13, 2), _computes("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), **_CU13),
        TorchBuild("cu130", CudaVersion(13, 0), _computes("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), **_CU13),
        TorchBuild("cu126", CudaVersion(12, 6), _computes("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"), **_CU12),
    ),
}
TORCH_VERSION = TORCH.split("==", 1)[1]
CUDA_BUILDS: tuple[TorchBuild, ...] = BUILDS_BY_TORCH[TORCH_VERSION]
CPU_BUILD = TorchBuild("cpu", None)


class Verdict(StrEnum):
    """Why no GPU build was chosen (the values name the fix)."""

    DRIVER_TOO_OLD = "driver_too_old"  # updating the driver helps
    GPU_UNSUPPORTED = "gpu_unsupported"  # a GPU no build of this torch has kernels for
    MIXED = "mixed"  # each GPU has a build, but no build has all of them


@dataclass(frozen=True)
class Choice:
    """The decision and its reason in plain words. ``build`` is None when no
    GPU build runs here (``verdict`` says why; the CPU build is the offer)."""

    build: TorchBuild | None
    reason: str
    verdict: str | None = None
    minor_compat: bool = False


def _gpu_words(gpus: tuple[Compute, ...]) -> str:
    return ", ".join(f"compute {g} ({g.family})" for g in gpus)


def choose(driver: CudaVersion | None, gpus: tuple[Compute, ...] = (), builds: tuple[TorchBuild, ...] = CUDA_BUILDS) -> Choice:
    """The newest build that runs on ``driver`` and on every GPU in ``gpus``.

    ``gpus`` empty means the compute capabilities are unknown: the driver alone decides.
    """
    if driver is None:
        return Choice(CPU_BUILD, "No NVIDIA driver: the CPU build (training runs on the processor).")
    on_driver = [b for b in builds if b.runs_driver(driver)]
    fitting = [b for b in on_driver if all(b.runs_gpu(g) for g in gpus)]
    if fitting:
        # Prefer a build the driver supports outright; minor-version compatibility is the fallback.
        best = max(fitting, key=lambda b: (not b.needs_minor_compat(driver), b.cuda))
        compat = best.needs_minor_compat(driver)
        why = [f"the driver supports CUDA {driver}"]
        if gpus:
            why.append(f"GPUs: {_gpu_words(gpus)}")
        for b in on_driver:
            if b not in fitting:
                missing = tuple(g for g in gpus if not b.runs_gpu(g))
                why.append(f"{b.tag} has no kernels for {_gpu_words(missing)}")
        if compat:
            why.append(f"runs through CUDA minor-version compatibility (driver {best.floor_series} or newer)")
        return Choice(best, f"{best.tag}: " + "; ".join(why) + ".", minor_compat=compat)
    orphans = [g for g in gpus if not any(b.runs_gpu(g) for b in builds)]
    if orphans:  # no driver update helps these
        return Choice(
            None,
            f"PyTorch {TORCH_VERSION} has no build for {_gpu_words(tuple(orphans))}: its builds start at "
            f"compute {min(k for b in builds for k in b.kernels)}.",
            Verdict.GPU_UNSUPPORTED,
        )
    oldest = builds[-1]
    if not on_driver:
        return Choice(
            None,
            f"The NVIDIA driver supports CUDA {driver}; the oldest PyTorch {TORCH_VERSION} build ({oldest.tag}) "
            f"needs a driver for CUDA {oldest.floor} or newer (driver {oldest.floor_series} or newer).",
            Verdict.DRIVER_TOO_OLD,
        )
    covering = [b for b in builds if all(b.runs_gpu(g) for g in gpus)]
    if covering:
        need = covering[-1]
        return Choice(
            None,
            f"Your GPUs, {_gpu_words(gpus)}, need the {need.tag} build, which needs a driver for CUDA "
            f"{need.floor} or newer (driver {need.floor_series} or newer); this driver supports CUDA {driver}.",
            Verdict.DRIVER_TOO_OLD,
        )
    per_gpu = "; ".join(f"compute {g} ({g.family}) runs only on {', '.join(b.tag for b in builds if b.runs_gpu(g))}" for g in gpus)
    return Choice(
        None,
        f"No single PyTorch {TORCH_VERSION} build runs on all these GPUs: {per_gpu}. Train on one kind of GPU "
        "(set CUDA_VISIBLE_DEVICES), or use the CPU build.",
        Verdict.MIXED,
    )


class NoGpuBuild(Exception):
    """No GPU build runs here; carries the :class:`Choice` with the reason."""

    def __init__(self, choice: Choice) -> None:
        super().__init__(choice.reason)
        self.choice = choice


def choose_build(driver: CudaVersion | None, gpus: tuple[Compute, ...] = ()) -> TorchBuild:
    """:func:`choose`'s build, or :class:`NoGpuBuild`."""
    choice = choose(driver, gpus)
    if choice.build is None:
        raise NoGpuBuild(choice)
    return choice.build


def table_markdown(builds: tuple[TorchBuild, ...] = CUDA_BUILDS) -> str:
    """The build table as Markdown, as docs/install.md shows it."""
    rows = [
        f"| PyTorch {TORCH_VERSION} build | Kernels for compute capability | Driver (NVML's CUDA version) | Wheel index |",
        "|---|---|---|---|",
    ]
    for b in builds:
        rows.append(
            f"| `{b.tag}` | {', '.join(str(k) for k in b.kernels)} | CUDA {b.cuda} or newer; CUDA {b.floor} "
            f"(driver {b.floor_series}) through minor-version compatibility | {b.index_url} |"
        )
    rows.append(f"| `{CPU_BUILD.tag}` | none (the processor) | none needed | {CPU_BUILD.index_url} |")
    return "\n".join(rows)
