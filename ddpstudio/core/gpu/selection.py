"""Which GPUs a run trains on (``--gpus 0,2``, the machine panel's check boxes), checked against the inventory.

A choice names GPUs by torch's number (what the GPU cards and ``ddpstudio doctor`` show) or by UUID (what
presets and "Copy as command" keep, so that a replaced GPU is an error, not another card). The ranks get
``CUDA_VISIBLE_DEVICES`` as the chosen GPUs' UUIDs, never as numbers: a number is read in CUDA's device
order, fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, while NVML and nvidia-smi count in PCI bus order,
so on a machine with mixed GPUs "1" can be another card. A UUID names one card whatever the order. CUDA
takes them "as given by nvidia-smi -L, such as GPU-8932f937-..." and enumerates the visible devices "in the
order of the sequence" (CUDA Programming Guide, CUDA_VISIBLE_DEVICES); torch reads the same form
(torch/cuda/__init__.py ``_parse_visible_devices``: ``if var.startswith("GPU-"): return
parse_list_with_prefix(var, "GPU-")``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ddpstudio.core.decision import Decision

from .model import GpuInfo

UUID_PREFIXES = ("GPU-", "MIG-")


class SelectionError(ValueError):
    """A GPU choice that cannot work here; ``field`` names the setting to change (``gpus`` or ``world_size``)."""

    def __init__(self, message: str, field: str = "gpus") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class GpuChoice:
    """The chosen GPUs in torch's order, out of ``count`` on this machine, and what the ranks are shown."""

    gpus: tuple[GpuInfo, ...]
    count: int
    visible: str  # CUDA_VISIBLE_DEVICES for every rank

    @property
    def ids(self) -> list[str]:
        """How the plan keeps the choice: each GPU's UUID (its torch number where torch gives none)."""
        return [gpu.uuid or str(gpu.index) for gpu in self.gpus]

    @property
    def names(self) -> str:
        return _numbers(self.gpus)

    def reason(self) -> str:
        return (f"GPU{'s' if len(self.gpus) > 1 else ''} {self.names} of {self.count}, chosen by you: the ranks see "
                "only these (CUDA_VISIBLE_DEVICES by UUID, so CUDA's device order cannot swap a card)")

    def ranks(self, requested: int | None) -> Decision:
        """One rank per chosen GPU: the choice sets the world size, and a different one asked is refused."""
        n = len(self.gpus)
        if requested is None or requested == n:
            return Decision(n, f"{n} rank{'s' if n > 1 else ''}: one per chosen GPU")
        raise SelectionError(
            f"{requested} rank{'s' if requested != 1 else ''} asked with {n} GPU{'s' if n > 1 else ''} chosen "
            f"({self.names}): each rank trains on its own GPU, so the chosen GPUs set the number of ranks; leave "
            f"the world size on auto, or choose {requested} GPU{'s' if requested != 1 else ''}", "world_size")


def _numbers(gpus: Sequence[GpuInfo]) -> str:
    numbers = [str(gpu.index) for gpu in gpus]
    return numbers[0] if len(numbers) == 1 else f"{', '.join(numbers[:-1])} and {numbers[-1]}"


def _listing(gpus: Sequence[GpuInfo]) -> str:
    return "; ".join(f"{gpu.index}: {gpu.name}" + (f" ({gpu.uuid})" if gpu.uuid else "") for gpu in gpus)


def choose_gpus(asked: Sequence[str], gpus: Sequence[GpuInfo], inherited: str | None = None) -> GpuChoice:
    """The GPUs ``asked`` names (numbers or UUIDs) among ``gpus`` (the inventory's); raises SelectionError.

    ``inherited``: the CUDA_VISIBLE_DEVICES this process started with, which torch's numbers count within
    (used only for a GPU torch gives no UUID for)."""
    shown = ",".join(asked)
    if not asked:
        raise SelectionError("no GPU chosen: choose at least one GPU to train on (--gpus 0,1 or the GPU cards' "
                             "check boxes), or leave the choice out to train on every GPU")
    here = f"this machine's GPUs are {_listing(gpus)}"
    chosen: dict[int, GpuInfo] = {}
    for token in asked:
        gpu = _find(token, gpus, here)
        if gpu.index in chosen:
            # Also what CUDA does with a repeated id: torch/cuda/__init__.py "Repeated ordinal results in empty set".
            raise SelectionError(f"GPU {gpu.index} is chosen twice (--gpus {shown}): name each GPU once")
        chosen[gpu.index] = gpu
    picked = tuple(sorted(chosen.values(), key=lambda g: g.index))  # rank r trains on the r-th in torch's order
    return GpuChoice(picked, len(gpus), _visible(picked, inherited))


def _find(token: str, gpus: Sequence[GpuInfo], here: str) -> GpuInfo:
    if token.isdigit():
        found = next((gpu for gpu in gpus if gpu.index == int(token)), None)
        if found is None:
            raise SelectionError(f"there is no GPU {token} here: {here}; choose among those numbers")
        return found
    if token.upper().startswith(UUID_PREFIXES):
        found = next((gpu for gpu in gpus if (gpu.uuid or "").lower() == token.lower()), None)
        if found is None:
            raise SelectionError(f"GPU {token} is not in this machine (removed or replaced, or the setup comes "
                                 f"from another machine): {here}; choose the GPUs again")
        return found
    raise SelectionError(f"{token!r} names no GPU: give the numbers the GPU cards and 'ddpstudio doctor' show "
                         "(--gpus 0,2) or the GPUs' UUIDs (GPU-...)")


def _visible(gpus: Sequence[GpuInfo], inherited: str | None) -> str:
    """The UUIDs; where torch gives a GPU none, every GPU's number within the inherited CUDA_VISIBLE_DEVICES
    (which the ranks inherit too): one kind only, as torch stops reading at the first item of another kind
    (torch/cuda/__init__.py ``parse_list_with_prefix``: "Anything other but prefix is ignored")."""
    if all(gpu.uuid for gpu in gpus):
        return ",".join(str(gpu.uuid) for gpu in gpus)
    from ddpstudio.core.launch.commands import visible_gpu  # the same rule as --one-gpu-per-rank's

    return ",".join(visible_gpu(gpu.index, inherited) for gpu in gpus)


def cpu_refusal(asked: Sequence[str], why: str) -> SelectionError:
    """GPUs chosen where the run trains on the CPU."""
    return SelectionError(f"GPUs are chosen (--gpus {','.join(asked)}), but this run trains on the CPU ({why}): "
                          "leave the GPU choice out")
