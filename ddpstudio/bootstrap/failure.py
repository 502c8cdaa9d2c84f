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

    @property
    def exit_code(self) -> int:
        return self.value


class BootstrapFailure(Exception):
    """A failure the user can act on; ``message`` is for people, ``detail`` for the log."""

    def __init__(self, problem: Problem, message: str, detail: str = "", cpu_fallback: bool = False) -> None:
        super().__init__(message)
        self.problem = problem
        self.message = message
        self.detail = detail
        self.cpu_fallback = cpu_fallback  # offer "Use the CPU build instead"

    @property
    def exit_code(self) -> int:
        return self.problem.exit_code


# Substrings of uv's (and the OS's) error text, checked in this order.
# Windows: os error 112 is ERROR_DISK_FULL, 32 ERROR_SHARING_VIOLATION;
# Linux: os error 28 is ENOSPC.
_PATTERNS: tuple[tuple[Problem, re.Pattern[str]], ...] = (
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
        "(at work: that the proxy or firewall allows pypi.org, download.pytorch.org and github.com), "
        "then click Retry.",
        detail,
    )


def disk_full(free_gb: float | None, needed_gb: float, where: str, detail: str = "") -> BootstrapFailure:
    free = f" Only {free_gb:.1f} GB are free there now." if free_gb is not None else ""
    return BootstrapFailure(
        Problem.DISK_FULL,
        f"There is not enough free disk space. DDP Studio needs about {needed_gb:.0f} GB on the drive of "
        f"{where} for PyTorch.{free} Free some space (for example, empty the Recycle Bin), then click Retry.",
        detail,
    )


def driver_too_old(driver_cuda: str, needed_cuda: str, driver_series: str | None) -> BootstrapFailure:
    series = f" (driver {driver_series} or newer)" if driver_series else ""
    return BootstrapFailure(
        Problem.DRIVER_TOO_OLD,
        f"Your NVIDIA driver is too old for PyTorch: it supports CUDA {driver_cuda}, and PyTorch needs CUDA "
        f"{needed_cuda}{series}. Update the driver (nvidia.com/drivers, or the NVIDIA App), restart the "
        "computer, then click Retry. Or use the CPU build now (training will not use the GPUs) and choose "
        "\"Repair DDP Studio\" after updating the driver.",
        f"driver CUDA {driver_cuda} < {needed_cuda}",
        cpu_fallback=True,
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


def from_uv(step: str, output: str, returncode: int) -> BootstrapFailure:
    """The failure for a uv command that exited with ``returncode``."""
    detail = f"uv ended ({describe_exit(returncode, current())}) while {step}"
    problem = classify(output)
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
