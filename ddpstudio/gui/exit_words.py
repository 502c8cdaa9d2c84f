"""A rank's exit, in words that say who ended it: "-15" is the launcher's polite stop, not a crash.

The launcher stops ranks with SIGTERM to their process group (POSIX, ``core.process.killer``)
or its stop file; a rank that obeys ends as Ctrl+C would (SIGINT, or STATUS_CONTROL_C_EXIT on
Windows, ``rank.stopwatch.exit_interrupted``); one still running after the grace period is
killed (SIGKILL, or the Job Object). No Qt.
"""

from __future__ import annotations

import signal

from ddpstudio.core.platform import Platform
from ddpstudio.core.process.exitcodes import describe_exit, windows_status

CONTROL_C_EXIT = 0xC000013A


def rank_exit_text(code: int | None, platform: Platform, stopping: bool) -> str:
    """"exit code 0", "stopped: it obeyed the stop request (SIGINT)", "killed by SIGSEGV", ..."""
    plain = describe_exit(code, platform)
    if code is None:
        return plain
    obeyed = code == -int(signal.SIGINT) or (platform.is_windows and windows_status(code) == CONTROL_C_EXIT)
    if obeyed:
        return f"stopped: it obeyed the stop request ({plain})"
    if code == -int(signal.SIGTERM):
        return f"stopped by the launcher's polite signal ({plain})"
    if stopping and hasattr(signal, "SIGKILL") and code == -int(signal.SIGKILL):
        return f"killed by the launcher: still running after the grace period ({plain})"
    return plain
