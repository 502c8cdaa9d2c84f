"""Runs one child process (uv, or the new environment's Python) for the bootstrap.

Output is merged and handed over line by line, so the window's log moves
while uv works. On Windows the child gets no console window: the bootstrap
itself runs under pythonw.exe, and a console flashing up for every uv call
is exactly what a non-CLI user should never see.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ddpstudio.core.platform import Platform

TAIL_LINES = 400


class Running:
    """The child process now running, so a window can stop it when the user closes it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self.cancelled = threading.Event()

    def _set(self, proc: subprocess.Popen[str] | None) -> None:
        with self._lock:
            self._proc = proc
            if proc is not None and self.cancelled.is_set():
                proc.kill()

    def cancel(self) -> None:
        """Kills the current child (and every later one) and waits for nothing."""
        self.cancelled.set()
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()


@dataclass(frozen=True)
class Result:
    returncode: int
    output: str  # the last TAIL_LINES lines
    timed_out: bool = False


def no_console_flags(platform: Platform) -> int:
    """Creation flags that keep a console program from opening a window on Windows."""
    return getattr(subprocess, "CREATE_NO_WINDOW", 0x08000000) if platform.is_windows else 0


def run(
    command: Sequence[str | os.PathLike[str]],
    platform: Platform,
    on_line: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
    running: Running | None = None,
) -> Result:
    """Runs ``command`` to completion (killing it after ``timeout`` seconds)."""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    proc = subprocess.Popen(
        [os.fspath(c) for c in command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        text=True,
        encoding="utf-8",
        errors="replace",
        creationflags=no_console_flags(platform),
    )
    if running is not None:
        running._set(proc)
    expired = threading.Event()

    def _expire() -> None:
        expired.set()
        proc.kill()

    timer = threading.Timer(timeout, _expire) if timeout else None
    if timer:
        timer.daemon = True
        timer.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\r\n")
            tail.append(line)
            on_line(line)
        return Result(proc.wait(), "\n".join(tail), expired.is_set())
    finally:
        if timer:
            timer.cancel()
        if running is not None:
            running._set(None)
        # Never leave a child behind, whatever happened to the reader.
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
