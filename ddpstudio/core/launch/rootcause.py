"""What a failed rank says about itself: the last line of its traceback, and the lines before."""

from __future__ import annotations

import re
import signal
from collections import deque
from dataclasses import dataclass, field


@dataclass
class RankFailure:
    rank: int
    exit_code: int | None
    t: float
    message: str = ""
    traceback_tail: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"rank": self.rank, "exit_code": self.exit_code, "t": self.t,
                "message": self.message, "traceback_tail": self.traceback_tail}

    def summary(self) -> str:
        if self.rank < 0:  # the launcher's own finding (it could not start the ranks, the disk is full)
            return self.message
        signame = _signal_name(self.exit_code)
        if signame and not self.message:
            return (f"rank {self.rank} was killed by {signame} (exit code {self.exit_code}) before it could report "
                    "an error: something outside the run ended it, often the out-of-memory killer or a user")
        code = (f"killed by {signame}" if signame else
                f"exit code {self.exit_code}" if self.exit_code is not None else "no exit code")
        return f"rank {self.rank} failed first ({code}): {self.message or 'no error message'}"


def _signal_name(exit_code: int | None) -> str | None:
    """POSIX reports a process killed by signal N as exit code -N (subprocess' convention).

    The shared exit-code describer (core/process/exitcodes.py, issue 14) covers Windows' codes too.
    """
    if exit_code is None or exit_code >= 0:
        return None
    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return f"signal {-exit_code}"


# torch.distributed prefixes an uncaught exception's lines with "[rank1]: ".
_RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")


class StderrTail:
    """The last lines a rank wrote to stderr, kept for the root-cause report."""

    def __init__(self, keep: int = 40) -> None:
        self.lines: deque[str] = deque(maxlen=keep)

    def add(self, line: str) -> None:
        if line.strip():
            self.lines.append(_RANK_PREFIX.sub("", line))

    def message(self) -> str:
        """The exception line of the last traceback, else the last line."""
        lines = list(self.lines)
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].startswith("Traceback"):
                after = [ln for ln in lines[i + 1:] if ln and not ln.startswith(" ")]
                if after:
                    return after[-1].strip()
        return lines[-1].strip() if lines else ""

    def tail(self, n: int = 15) -> list[str]:
        return list(self.lines)[-n:]
