"""torch's C++ log lines on a launcher's stderr: kept in DDP Studio's log folder, not printed on the console.

A node launcher that cannot reach its host (``ddpstudio join``) builds a TCPStore client in its own
process, and each failed try makes torch's C++ side log a warning with the whole exception, C++ stack
frames included: about 80 lines before our one good last line (issue 27). Seen with torch 2.14.1::

    [W1126 23:04:22.899322552 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate ... retrying
    Exception raised from throwTimeoutError at .../torch/csrc/distributed/c10d/socket.cpp:1030 (most recent call first):
    frame #0: c10::Error::Error(c10::SourceLocation, ...) + 0x9d (0x7f2f941e660d in .../libc10.so)
    <omitting python frames>

The first line is c10's log prefix (severity letter, month and day: the pattern ``rootcause._NATIVE_LOG``
also reads); the rest is ``c10::Error``'s backtrace. Such a block goes to the log file; everything
else passes through.
"""

from __future__ import annotations

import re
from pathlib import Path

NATIVE_START = re.compile(r"^\[[WEIF]\d{4} \d")
NATIVE_MORE = re.compile(r"^(Exception raised from |frame #\d+: |<omitting python frames>|\s*$)")
LOG_NAME = "torch-native.log"


class NativeLog:
    """Sorts a launcher's stderr lines: :meth:`keep` says whether a line was torch's and is in the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.inside = False  # within a block that a native log line started
        self.kept = 0

    def keep(self, line: str) -> bool:
        if NATIVE_START.match(line):
            self.inside = True
        elif not (self.inside and NATIVE_MORE.match(line)):
            self.inside = False
            return False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line if line.endswith("\n") else line + "\n")
        except OSError:
            pass  # a log folder that takes no writes loses torch's noise, never the run
        self.kept += 1
        return True


def native_log() -> NativeLog:
    from ddpstudio.core import paths

    return NativeLog(paths.log_dir() / LOG_NAME)
