"""The CLI's human lines in the window's Log tab: the plan and its reasons, steps every N, epoch
summaries, eval results, where the weights went, and the end.

It runs the CLI's own :class:`ddpstudio.cli.progress.ProgressView` (non-terminal
mode) and hands each line it prints to the log, so both front ends say the same.
Events the window already logs in its own words (checkpoints, warnings) are
not narrated twice.
"""

from __future__ import annotations

from typing import Callable

from ddpstudio.cli.progress import ProgressView
from ddpstudio.core import protocol

NARRATED = frozenset({protocol.RUN_STARTED, protocol.GLOBAL_STEP, protocol.EPOCH_END, protocol.EVAL,
                      protocol.MODEL_SAVED, protocol.RUN_FINISHED})
STEP_EVERY = 10


class _Lines:
    """A text stream that hands over whole lines."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit, self.buffer = emit, ""

    def write(self, text: str) -> None:
        self.buffer += text
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            if line.strip():
                self.emit(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class RunNarrator:
    def __init__(self, emit: Callable[[str], None], every: int = STEP_EVERY) -> None:
        self.emit, self.every = emit, every
        self.view: ProgressView | None = None

    def feed(self, event: protocol.Event) -> None:
        if event.type == protocol.RUN_STARTED or self.view is None:
            self.view = ProgressView(_Lines(self.emit), tty=False, every=self.every)
        if event.type in NARRATED:
            self.view.feed(event)
