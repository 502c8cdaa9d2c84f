"""Starts the launcher as a child process and reads its event stream (CLI, benchmarks).

The window does the same through a QProcess; both speak to the launcher only
through its stdin (``stop``) and its stdout (protocol events). Its stderr is a
pipe we read, never our own: under pythonw (the window's benchmarks) we have
none, and CPython then hands a child the write end of a pipe whose read end
it has closed (Lib/subprocess.py ``_get_handles``: ``GetStdHandle`` is None ->
``CreatePipe``, ``CloseHandle`` of the read end), so the launcher's first
word on stderr raised and a refusal or a crash ended without its run_finished.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

from ddpstudio.core import protocol
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import SAFE_PATH, Platform, current
from ddpstudio.core.policy import write_plan
from ddpstudio.core.launch.commands import console_python
from ddpstudio.core.process.proctree import CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW


LAUNCHER_MODULE = "ddpstudio.core.launch.launcher"
STDERR_LINES = 50  # of the launcher's stderr, kept for a launcher that ends without a result
STDERR_DRAIN_S = 5.0
READ_BYTES = 1 << 16  # at most this much of the launcher's stdout per read


def launcher_command(plan_path: str | Path, python: str | None = None, module: str = LAUNCHER_MODULE,
                     extra: tuple[str, ...] = ()) -> list[str]:
    """The launcher's command line; by default this interpreter, as python.exe even under pythonw.exe
    (a launcher without a console cannot signal on Windows: cpython #112190). ``module``/``extra``:
    another launcher with the same stream and stdin control (the node launcher, core/nodes)."""
    python = python or console_python(sys.executable, current())
    return [python, SAFE_PATH, "-m", module, str(plan_path), *extra, "--stdin-control"]


class Session:
    """One run: ``start()``, iterate ``events()``, ``stop()`` at any time, then ``returncode``."""

    def __init__(self, plan: Plan, platform: Platform | None = None, module: str = LAUNCHER_MODULE,
                 extra: tuple[str, ...] = (), env: dict[str, str] | None = None) -> None:
        self.plan, self.platform = plan, platform or current()
        self.module, self.extra, self.env = module, extra, env  # env: the launcher's whole environment
        self.proc: subprocess.Popen | None = None
        self.parser = protocol.EventParser()
        self.final: protocol.Event | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._stderr_reader: threading.Thread | None = None

    def start(self) -> None:
        plan_path = write_plan(self.plan)
        # Its own group/session: Ctrl+C reaches us, and we stop the run through stdin, in order.
        # On Windows no console window either: the window's benchmarks start it from pythonw.
        extra = ({"creationflags": CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW} if self.platform.is_windows
                 else {"start_new_session": True})
        self.proc = subprocess.Popen(launcher_command(plan_path, module=self.module, extra=self.extra),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=self.env, text=True, encoding="utf-8", errors="replace", bufsize=1,
                                     **extra)
        self._stderr_reader = threading.Thread(target=self._read_stderr, name="launcher-stderr", daemon=True)
        self._stderr_reader.start()

    def _read_stderr(self) -> None:
        """Keep the launcher's last stderr lines, and pass them on to ours when we have one."""
        from ddpstudio.core.launch.nativelog import native_log

        assert self.proc is not None and self.proc.stderr is not None
        native = native_log()
        for line in self.proc.stderr:
            if native.keep(line):  # torch's C++ log and stack frames: in the log folder (core/launch/nativelog.py)
                if native.kept == 1:
                    self._say(f"(torch's own log lines are kept in {native.path})\n")
                continue
            self.stderr_tail.append(line.rstrip("\n"))
            self._say(line)

    @staticmethod
    def _say(line: str) -> None:
        try:
            if sys.stderr is not None:  # None under pythonw
                sys.stderr.write(line)
                sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def events(self) -> Iterator[protocol.Event]:
        for batch in self.batches():
            yield from batch

    def batches(self, unread: frozenset[str] = frozenset()) -> Iterator[list[protocol.Event]]:
        """The events in order, a list per read of the launcher's stdout (whatever it had written): a
        front end shows a list and then flushes once. ``unread``: types the caller ignores, left unparsed.

        Per-line work (issue 20): a script that prints each step gives the launcher three events per line
        (log, step, global step); reading them one line and one flush at a time cost the CLI about 50 us
        of CPU per printed line, taken from the ranks on a machine whose cores they fill."""
        assert self.proc is not None and self.proc.stdout is not None
        unread = unread - {protocol.RUN_FINISHED}  # the result: always read
        for lines in self._lines():
            batch = []
            for line in lines:
                if unread and _type_of(line) in unread:
                    continue
                for event in self.parser.feed(line):
                    if event.type == protocol.RUN_FINISHED:
                        self.final = event
                    batch.append(event)
            if batch:
                yield batch
        self.proc.wait()
        if self._stderr_reader is not None:
            self._stderr_reader.join(STDERR_DRAIN_S)  # its last words, unless a grandchild holds the pipe

    def _lines(self) -> Iterator[list[str]]:
        """The complete lines of each read of the launcher's stdout (the last one at its end, complete or not).

        Read as bytes from the pipe under the text wrapper (``read1``: what one read returns, without waiting
        for more), split at ``\n`` and ``\r`` as the wrapper's universal newlines do (an empty line more
        where ``\r\n`` is split across reads: no event), decoded line by line as UTF-8 with replacement
        (no line is cut inside a character: no byte of a multi-byte UTF-8 character is ``\n`` or ``\r``)."""
        raw = self.proc.stdout.buffer  # type: ignore[union-attr]
        partial = b""
        while True:
            data = raw.read1(READ_BYTES)
            if not data:
                break
            if b"\r" in data:
                data = data.replace(b"\r", b"\n")
            lines = (partial + data).split(b"\n")
            partial = lines.pop()
            yield [line.decode("utf-8", errors="replace") for line in lines]
        if partial:
            yield [partial.decode("utf-8", errors="replace")]

    @property
    def last_words(self) -> str:
        """The launcher's last non-empty stderr line ("" when it said nothing)."""
        return next((line for line in reversed(self.stderr_tail) if line.strip()), "")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None or self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        except OSError:
            pass

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    @property
    def state(self) -> str | None:
        return self.final.get("state") if self.final else None


def _type_of(line: str) -> str | None:
    """The ``type`` of a line as the launcher writes it (``{"type":"step","v":1,...``), when it is of this
    schema version (a newer one is parsed, for its warning); None for any other line."""
    if not line.startswith('{"type":"'):
        return None
    end = line.find('"', 9)
    if end < 0 or not line.startswith(_THIS_VERSION, end + 1):
        return None
    return line[9:end]


_THIS_VERSION = f',"v":{protocol.SCHEMA_VERSION},'
