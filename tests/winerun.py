"""A Windows program of the Wine tier whose standard output is protocol events (``ddpstudio run --json``).

The events are read as they arrive, through the one parser every front end uses, so a test can act in
the middle of a run (stop it, kill its launcher) and then check how it ended.
"""

from __future__ import annotations

import subprocess
import threading
import time

from ddpstudio.core.protocol import Event, EventParser


class WindowsRun:
    """``proc``'s events (``events``) and standard error (``stderr``), collected by two reader threads."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.events: list[Event] = []
        self.stderr: list[str] = []
        self._arrived = threading.Condition()
        self._readers = [threading.Thread(target=self._read_events, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read_events(self) -> None:
        parser = EventParser()
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._arrived:
                self.events += parser.feed(line)
                self._arrived.notify_all()
        with self._arrived:
            self._arrived.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def of_type(self, type_: str) -> list[Event]:
        with self._arrived:
            return [e for e in self.events if e.type == type_]

    def wait_for(self, type_: str, timeout: float) -> Event:
        """The first event of ``type_``; fails, saying what came instead, when the program ends first
        or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                found = next((e for e in self.events if e.type == type_), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                ended = self.proc.poll() is not None and not self._readers[0].is_alive()
                if ended or left <= 0:
                    why = "the program ended" if ended else f"{timeout:g} s passed"
                    raise AssertionError(f"no {type_!r} event: {why}\n{self.explain()}")
                self._arrived.wait(min(left, 0.5))

    def finish(self, timeout: float) -> int:
        """The program's exit code once it has ended and its output has been read (killed at ``timeout``)."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running after {timeout:g} s: killed\n{self.explain()}") from None
        for reader in self._readers:
            reader.join(10)
        return code

    def explain(self) -> str:
        """The last events and standard-error lines, for a failure message."""
        lines = [e.to_line()[:300] for e in self.events[-25:]]
        return "\n".join(["events:", *lines, "stderr:", *self.stderr[-40:]])
