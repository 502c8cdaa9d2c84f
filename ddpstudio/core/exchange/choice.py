"""Which way gradients travel (``native`` or ``staged`` through CPU memory), each choice with its reason.

``auto`` stages gradients when Gloo would all-reduce CUDA tensors and the
probe has not shown that this machine's PyTorch can: on Windows builds that
all-reduce dies with an access violation at the first step (pytorch #186535).
The probe's outcome is an argument (the seam tests use); the launch policy
reads the cached one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# The launcher passes the mode to every rank through these (the recipe also reads its plan).
EXCHANGE_ENV = "DDPSTUDIO_GRAD_EXCHANGE"
COMPRESSION_ENV = "DDPSTUDIO_GRAD_COMPRESSION"

TRAP = "pytorch #186535"


class GradExchange(StrEnum):
    NATIVE = "native"  # DDP's own all-reduce, on the device of the gradients
    STAGED = "staged"  # each bucket copied to CPU memory, all-reduced there with Gloo, copied back


class GradCompression(StrEnum):
    NONE = "none"
    FP16 = "fp16"  # buckets travel as float16: half the bytes, approximate


EXCHANGE_CHOICES = ("auto", *(m.value for m in GradExchange))
COMPRESSION_CHOICES = tuple(c.value for c in GradCompression)


class ExchangeError(ValueError):
    """An exchange choice that cannot work; ``field`` names the setting to change."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ExchangeDecision:
    value: GradExchange | GradCompression
    reason: str  # '' when there is nothing worth saying


_PROBE_SAYS = {
    "crashes": "Gloo's all-reduce of CUDA tensors crashed when this machine's PyTorch was checked",
    "wrong": "Gloo's all-reduce of CUDA tensors gave a wrong result when this machine's PyTorch was checked",
    None: "Gloo's all-reduce of CUDA tensors has not been checked on this machine yet "
          "(Windows builds crash on it)",
}


def choose_exchange(requested: str, backend: str, device: str, probe_outcome: str | None) -> ExchangeDecision:
    """``auto`` -> ``staged`` for Gloo on CUDA unless the probe said ``native``; otherwise ``native``."""
    if requested not in EXCHANGE_CHOICES:
        raise ExchangeError(f"unknown gradient exchange {requested!r}: choose {', '.join(EXCHANGE_CHOICES)}",
                            "grad_exchange")
    gloo_cuda = backend == "gloo" and device == "cuda"
    if requested == GradExchange.STAGED:
        if backend != "gloo":
            raise ExchangeError("the staged gradient exchange all-reduces in CPU memory with Gloo; "
                                "choose the gloo backend, or the native (or auto) exchange", "grad_exchange")
        where = "" if gloo_cuda else " (on the CPU it only adds the hook's copies)"
        return ExchangeDecision(GradExchange.STAGED, "gradients staged through CPU memory: chosen by you" + where)
    if requested == GradExchange.NATIVE:
        warn = ""
        if gloo_cuda and probe_outcome in ("crashes", "wrong"):
            warn = f" (the check found Gloo's CUDA all-reduce {probe_outcome} here: {TRAP}; staged avoids it)"
        return ExchangeDecision(GradExchange.NATIVE, "native gradient exchange: chosen by you" + warn)
    if not gloo_cuda:
        why = "NCCL all-reduces on the GPU" if backend == "nccl" else "the ranks train on the CPU"
        return ExchangeDecision(GradExchange.NATIVE, f"native gradient exchange: {why}")
    if probe_outcome == "native":
        return ExchangeDecision(GradExchange.NATIVE, "native gradient exchange: Gloo all-reduces CUDA tensors "
                                                     "correctly on this machine (checked)")
    said = _PROBE_SAYS.get(probe_outcome, f"the check of Gloo's CUDA all-reduce says {probe_outcome!r}")
    return ExchangeDecision(GradExchange.STAGED, f"gradients staged through CPU memory: {said} ({TRAP})")


def choose_compression(requested: str) -> ExchangeDecision:
    """Full precision (no reason shown) or float16 buckets."""
    if requested not in COMPRESSION_CHOICES:
        raise ExchangeError(f"unknown gradient compression {requested!r}: choose "
                            f"{' or '.join(COMPRESSION_CHOICES)}", "grad_compression")
    if requested == GradCompression.NONE:
        return ExchangeDecision(GradCompression.NONE, "")
    return ExchangeDecision(GradCompression.FP16, "gradients travel as float16: half the bytes, "
                                                  "approximate (chosen by you)")
