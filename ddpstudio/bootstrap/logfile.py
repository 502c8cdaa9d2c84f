"""Copies every event to the installation's bootstrap.log (the log users send us)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from ddpstudio.bootstrap.events import Event, Failed, Finished, LogLine, Sink, StepStarted


def line_for(event: Event) -> str:
    """How an event reads in the log file (and on the console)."""
    if isinstance(event, StepStarted):
        return f"[{event.index}/{event.total}] {event.title}"
    if isinstance(event, LogLine):
        return f"    {event.text}"
    if isinstance(event, Finished):
        return "DDP Studio is set up."
    if isinstance(event, Failed):
        detail = f"\n    detail: {event.failure.detail}" if event.failure.detail else ""
        return f"FAILED ({event.failure.problem.name}): {event.failure.message}{detail}"
    return repr(event)


def tee(sink: Sink, path: Path) -> Sink:
    """A sink that appends each event to ``path``, then passes it on.
    A log that cannot be written (disk full!) must not stop the setup."""

    def _sink(event: Event) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"{datetime.now():%Y-%m-%d %H:%M:%S} {line_for(event)}\n")
        except OSError:
            pass
        sink(event)

    return _sink
