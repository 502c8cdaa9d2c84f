"""What a failed rank says about itself: the last line of its traceback, and the lines before."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from ddpstudio.core.platform import Platform, current
from ddpstudio.core.process.exitcodes import describe_exit


@dataclass
class RankFailure:
    rank: int
    exit_code: int | None
    t: float
    message: str = ""
    traceback_tail: list[str] = field(default_factory=list)
    platform: Platform = field(default_factory=current, repr=False, compare=False)  # how to read exit_code

    def to_dict(self) -> dict:
        return {"rank": self.rank, "exit_code": self.exit_code, "t": self.t,
                "message": self.message, "traceback_tail": self.traceback_tail,
                "exit": describe_exit(self.exit_code, self.platform)}

    def summary(self) -> str:
        if self.rank < 0:  # the launcher's own finding (it could not start the ranks, the disk is full)
            return self.message
        code = describe_exit(self.exit_code, self.platform)
        if code in _FROM_OUTSIDE and not self.message:
            return (f"rank {self.rank} was {code} (exit code {self.exit_code}) before it could report an error: "
                    "something outside the run ended it, often the out-of-memory killer or a user")
        return f"rank {self.rank} failed first ({code}): {self.message or 'no error message'}"


# Signals another process sends (the out-of-memory killer, a user, a service manager), unlike a crash's.
_FROM_OUTSIDE = {f"killed by {name}" for name in ("SIGKILL", "SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT")}

# torch.distributed prefixes an uncaught exception's lines with "[rank1]: ".
_RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")
# What C++ code logs after a Python exception ("[W1124 ...] ProcessGroupGloo..."): not part of it.
_NATIVE_LOG = re.compile(r"^\[[WEIF]\d{4} |^\[(?:W|E|I) ")
MAX_MESSAGE_LINES = 12


def without_rank_prefix(line: str) -> str:
    """``line`` as the root cause's traceback tail holds it: without torch's "[rankN]: "."""
    return _RANK_PREFIX.sub("", line)


def _exception_lines(lines: list[str]) -> list[str]:
    """The exception's own lines: from its first line until native log noise, at most a dozen."""
    out: list[str] = []
    for line in lines:
        if _NATIVE_LOG.match(line) or len(out) == MAX_MESSAGE_LINES:
            break
        out.append(line.rstrip())
    return out


class StderrTail:
    """The last lines a rank wrote to stderr, kept for the root-cause report."""

    def __init__(self, keep: int = 40) -> None:
        self.lines: deque[str] = deque(maxlen=keep)

    def add(self, line: str) -> None:
        if line.strip():
            self.lines.append(without_rank_prefix(line))

    def message(self) -> str:
        """The exception of the last traceback, all its lines (a message may span several), else the last line."""
        lines = list(self.lines)
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].startswith("Traceback"):
                frames_end = next((j for j in range(i + 1, len(lines)) if not lines[j].startswith(" ")), None)
                if frames_end is not None:
                    return "\n".join(_exception_lines(lines[frames_end:])).strip()
        # Else the last line that says something: torchrun's failure summary ends in a rule of "=" signs.
        return next((line.strip() for line in reversed(lines) if any(c.isalnum() for c in line)), "")

    def tail(self, n: int = 15) -> list[str]:
        return list(self.lines)[-n:]
