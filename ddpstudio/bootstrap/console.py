"""The headless front end (``--no-window``): for CI, silent installs and tests.

Prints each step and uv's output; ends with the plain-language message on
stderr and the problem's exit code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from ddpstudio.bootstrap.environment import Options, attempt
from ddpstudio.bootstrap.events import Event
from ddpstudio.bootstrap.logfile import line_for, tee


def _write(stream: TextIO | None, text: str) -> None:
    if stream is not None:  # None under pythonw.exe
        stream.write(text + "\n")
        stream.flush()


def run_console(options: Options, log_file: Path | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Runs one attempt; returns 0 or the failure's exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr

    def sink(event: Event) -> None:
        _write(out, line_for(event))

    failure = attempt(options, tee(sink, log_file) if log_file else sink)
    if failure is None:
        return 0
    _write(err, "")
    _write(err, failure.message)
    return failure.exit_code
