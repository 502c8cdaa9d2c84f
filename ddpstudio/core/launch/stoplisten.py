"""What stops a running launcher: SIGINT/SIGTERM/SIGBREAK, and with ``--stdin-control`` a 'stop' line or stdin's end.

Shared by the single-machine launcher and the node launcher of a
multi-machine run (``core/nodes/launch.py``).
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Protocol


class Stoppable(Protocol):
    def request_stop(self, reason: str) -> None: ...


def _watch_stdin(launcher: Stoppable) -> None:
    for line in sys.stdin:
        if line.strip().lower() == "stop":
            break
    launcher.request_stop("asked to stop")


def listen_for_stop(launcher: Stoppable, stdin_control: bool) -> None:
    """SIGINT/SIGTERM/SIGBREAK (and, with ``stdin_control``, a 'stop' line or stdin's end) stop the run."""
    def on_signal(signum, _frame):
        launcher.request_stop(f"signal {signal.Signals(signum).name}")

    for name in ("SIGINT", "SIGTERM", "SIGBREAK"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), on_signal)
    if stdin_control:
        threading.Thread(target=_watch_stdin, args=(launcher,), daemon=True).start()
