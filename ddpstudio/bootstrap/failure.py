"""Every way the bootstrap can fail, as one plain-language message each.

A failure carries a :class:`Problem` (which decides the exit code and
whether the window offers "Use the CPU build instead"), the message a user
reads, and the technical detail that goes to the log. uv's own error text is
mapped onto a problem by :func:`classify`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ddpstudio.core.platform import current
from ddpstudio.core.process.exitcodes import describe_exit
from ddpstudio.bootstrap.network import HOSTS_SENTENCE
from ddpstudio.bootstrap.pins import TORCH, TORCHVISION


class Problem(Enum):
    UNEXPECTED = 1
    NETWORK = 3
    DRIVER_TOO_OLD = 4
    DISK_FULL = 5
    NOT_VERIFIED = 6
    FILES_MISSING = 7
    INSTALL_FAILED = 8
    FILES_IN_USE = 9
    CANCELLED = 10
    BUSY = 11
    GPU_UNSUPPORTED = 12  # no PyTorch build has kernels for (all) these GPUs
    NOT_ON_INDEX = 13  # the chosen wheel index does not have the pinned torch

    @property
    def exit_code(self) -> int:
        return self.value


class BootstrapFailure(Exception):
    """A failure the user can act on; ``message`` is for people, ``detail`` for the log."""

    def __init__(
        self, problem: Problem, message: str, detail: str = "", cpu_fallback: bool = False, retry_helps: bool = True
    ) -> None:
        super().__init__(message)
        self.problem = problem
        self.message = message
        self.detail = detail
        self.cpu_fallback = cpu_fallback  # offer "Use the CPU build instead"
        self.retry_helps = retry_helps  # False: the same attempt fails the same way, offer no Retry

    @property
    def exit_code(self) -> int:
        return self.problem.exit_code


# Substrings of uv's (and the OS's) error text, checked in this order.
# Windows: os error 112 is ERROR_DISK_FULL, 32 ERROR_SHARING_VIOLATION;
# Linux: os error 28 is ENOSPC.
_PATTERNS: tuple[tuple[Problem, re.Pattern[str]], ...] = (
    # uv 0.13: "there is no version of torch==2.14.1" + "hint: `torch` was found on <index>,
    # but not at the requested version" (first-index strategy: no fallback to later indexes).
    (
        Problem.NOT_ON_INDEX,
        re.compile(
            r"there is no version of (torch|torchvision)==|"
            r"`(torch|torchvision)` was found on \S+, but not at the requested version",
            re.I,
        ),
    ),
    (Problem.DISK_FULL, re.compile(r"no space left on device|not enough space on the disk|os error (28|112)\b|disk (is )?full", re.I)),
    (Problem.FILES_IN_USE, re.compile(r"being used by another process|os error 32\b|access is denied|os error 5\b", re.I)),
    (
        Problem.NETWORK,
        re.compile(
            r"error sending request|failed to fetch|dns error|failed to lookup address|could not connect|"
            r"connection (refused|reset|timed out)|tcp connect error|network is unreachable|"
            r"operation timed out|failed to download|no such host is known|os error (11001|10060|10061)\b",
            re.I,
        ),
    ),
)


def classify(output: str) -> Problem:
    """Which problem uv's output describes; INSTALL_FAILED when none matches."""
    for problem, pattern in _PATTERNS:
        if pattern.search(output):
            return problem
    return Problem.INSTALL_FAILED


def network(what: str, detail: str = "") -> BootstrapFailure:
    return BootstrapFailure(
        Problem.NETWORK,
        f"DDP Studio could not download {what}. Check that this computer is connected to the internet "
        f"(at work: that the proxy or firewall allows {HOSTS_SENTENCE}; \"Network settings\" sets a proxy, "
        "the system's certificates or a Python download mirror), then click Retry.",
        detail,
    )


def index_url_in(output: str) -> str | None:
    """The index uv names in its "was found on <index>, but not at the requested version" hint."""
    match = re.search(r"`(?:torch|torchvision)` was found on (\S+?),? but not at the requested version", output)
    return match.group(1) if match else None


def not_on_index(index_url: str, pins: str, detail: str = "") -> BootstrapFailure:
    """The chosen PyTorch index lacks the pinned version: retrying cannot help, the CPU build can."""
    return BootstrapFailure(
        Problem.NOT_ON_INDEX,
        f"The PyTorch wheel index {index_url} does not offer {pins}, so this PyTorch build cannot be installed. "
        "Use the CPU build now (training will not use the GPUs), or install a DDP Studio version made for "
        "this PyTorch build.",
        detail,
        cpu_fallback=True,
        retry_helps=False,
    )


def no_gpu_build(reason: str, driver_update_helps: bool) -> BootstrapFailure:
    """No GPU build runs here (driver too old, GPU too old, or GPUs no one build covers)."""
    if driver_update_helps:
        then = ("Update the NVIDIA driver (nvidia.com/drivers, or the NVIDIA App), restart the computer, then click "
                "Retry. Or use the CPU build now (training will not use the GPUs) and choose \"Repair DDP Studio\" "
                "after updating the driver.")
        return BootstrapFailure(Problem.DRIVER_TOO_OLD, f"Your NVIDIA driver is too old for PyTorch. {reason} {then}",
                                reason, cpu_fallback=True)
    return BootstrapFailure(Problem.GPU_UNSUPPORTED, f"{reason} Use the CPU build (training will not use the GPUs).",
                            reason, cpu_fallback=True, retry_helps=False)


def disk_full(free_gb: float | None, needed_gb: float, where: str, detail: str = "") -> BootstrapFailure:
    free = f" Only {free_gb:.1f} GB are free there now." if free_gb is not None else ""
    return BootstrapFailure(
        Problem.DISK_FULL,
        f"There is not enough free disk space. DDP Studio needs about {needed_gb:.0f} GB on the drive of "
        f"{where} for PyTorch.{free} Free some space (for example, empty the Recycle Bin), then click Retry.",
        detail,
    )


def files_missing(what: str) -> BootstrapFailure:
    return BootstrapFailure(
        Problem.FILES_MISSING,
        f"DDP Studio's setup files are incomplete ({what} is missing). Run the DDP Studio installer again.",
        what,
    )


def files_in_use(detail: str = "") -> BootstrapFailure:
    return BootstrapFailure(
        Problem.FILES_IN_USE,
        "Some of DDP Studio's files are in use. Close DDP Studio and any training it started, then click Retry.",
        detail,
    )


def not_verified(reason: str, detail: str = "", cpu_fallback: bool = False) -> BootstrapFailure:
    return BootstrapFailure(
        Problem.NOT_VERIFIED,
        f"PyTorch was installed but did not pass its check: {reason} Click Retry to install it again.",
        detail,
        cpu_fallback=cpu_fallback,
    )


def from_uv(step: str, output: str, returncode: int, torch_index: str | None = None) -> BootstrapFailure:
    """The failure for a uv command that exited with ``returncode``
    (``torch_index``: the PyTorch index it was given, named when it lacks the pins)."""
    detail = f"uv ended ({describe_exit(returncode, current())}) while {step}"
    problem = classify(output)
    if problem is Problem.NOT_ON_INDEX:
        return not_on_index(index_url_in(output) or torch_index or "(the PyTorch index)", f"{TORCH} and {TORCHVISION}", detail)
    if problem is Problem.NETWORK:
        return network("PyTorch and DDP Studio's other parts" if "install" in step else "Python", detail)
    if problem is Problem.DISK_FULL:
        return disk_full(None, 8, "DDP Studio", detail)
    if problem is Problem.FILES_IN_USE:
        return files_in_use(detail)
    return BootstrapFailure(
        Problem.INSTALL_FAILED,
        f"Setting up failed while {step}. The log shows uv's own message. Click Retry; if it fails again, "
        "save the log (bootstrap.log in DDP Studio's folder) and send it to us.",
        detail,
    )


def unexpected(exc: BaseException) -> BootstrapFailure:
    import traceback

    return BootstrapFailure(
        Problem.UNEXPECTED,
        f"Setting up stopped because of an unexpected error ({type(exc).__name__}: {exc}). Click Retry; if it "
        "happens again, send us the log (bootstrap.log in DDP Studio's folder).",
        "".join(traceback.format_exception(exc)),
    )


def cancelled() -> BootstrapFailure:
    return BootstrapFailure(
        Problem.CANCELLED,
        "Setup was stopped before it finished. Start DDP Studio (or choose \"Repair DDP Studio\") to finish it.",
    )


def busy() -> BootstrapFailure:
    return BootstrapFailure(
        Problem.BUSY,
        "DDP Studio is already being set up in another window. Wait until it has finished, then start DDP Studio again.",
    )
