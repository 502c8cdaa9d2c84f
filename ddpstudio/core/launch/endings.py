"""How a launcher's event stream ends when no run could: the one ``run_finished`` the protocol promises.

``refuse``: nothing was started (a bad plan, a claimed store path): one
``ddpstudio: error:`` line on stderr, a failed ``run_finished`` on stdout,
exit 2. ``failed_event``: the same ending for a launcher whose own code
failed after it had started ranks (``Launcher.crashed``).
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ddpstudio.core import protocol

EXIT_REFUSED = 2  # bad plan, or the store path is claimed: nothing was started


def extra(result: dict, *keys: str) -> dict:
    """The optional fields of result.json that run_finished also carries."""
    return {k: result[k] for k in keys if k in result}


def failed_event(message: str, run_dir: str | None = None, refused: bool = False) -> protocol.Event:
    """A run_finished (failed) with ``message`` as its root cause; ``refused``: nothing was started and the
    message is already on stderr (a console front end then prints nothing more)."""
    extra = {"refused": True} if refused else {}
    return protocol.make_event(protocol.RUN_FINISHED, state=protocol.FAILED, duration_s=0.0,
                               root_cause={"rank": -1, "exit_code": None, "t": time.time(), "message": message,
                                           "traceback_tail": []},
                               summary=message, run_dir=run_dir, **extra)


def to_stderr(text: str) -> None:
    """``text`` for whoever reads our stderr. A missing or broken one (a parent under pythonw gives a
    pipe nobody reads: core/launch/session.py) must not end the launcher before its run_finished."""
    try:
        if sys.stderr is not None:
            print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def refuse(message: str, run_dir: str | None = None, out: TextIO | None = None) -> int:
    """Nothing was started: one error line on stderr, and the stream's one run_finished (failed). Exit 2."""
    to_stderr(f"ddpstudio: error: {message}")
    out = out or sys.stdout
    try:
        out.write(failed_event(message, run_dir, refused=True).to_line() + "\n")
        out.flush()
    except (OSError, ValueError):
        pass
    return EXIT_REFUSED
