"""A rank that trained, then aborted while its interpreter exited: say what it was.

PyTorch's Gloo worker threads can free a finished collective after the
interpreter began to finalize, and die there with ``terminate called without
an active exception`` (SIGABRT; abort() ends a Windows process with exit code
3): the bug and its stack are in rank/gloo_exit.py (pytorch PR #179291,
abandoned). The rank helper's exit wait avoids it; a script run without the
helper (``--no-rank-helper``) meets it now and then (1 in 8 two-rank runs of
tests/scripts/ddp_env_style.py here). The run still failed (a rank died by a
signal), but the root cause says that its training had ended and what avoids it,
instead of leaving the user to search for a C++ runtime message.
"""

from __future__ import annotations

from ddpstudio.core.platform import Platform

TERMINATE = "terminate called without an active exception"
SIGABRT = 6
WINDOWS_ABORT = 3  # what the C runtime's abort() exits with on Windows


def gloo_exit_abort_note(message: str, exit_code: int | None, trained: bool, rank_helper: bool,
                         platform: Platform) -> str | None:
    """The note for a rank that trained and then aborted at exit with the Gloo runtime message, else None."""
    aborted = exit_code == (WINDOWS_ABORT if platform.is_windows else -SIGABRT)
    if not (aborted and trained and TERMINATE in message):
        return None
    avoid = ("the rank helper's exit wait avoids it; this run had the helper off (--no-rank-helper)"
             if not rank_helper else "the rank helper's exit wait did not avoid it this time")
    return ("the rank aborted after it had trained, most likely while its interpreter exited: a known PyTorch "
            f"Gloo crash at exit (pytorch PR #179291); {avoid}; a script can avoid it by sleeping 0.1 s "
            "after destroy_process_group()")
