"""A rank process as the launcher sees it, and the run's states.

``RankProc`` is what the launcher keeps per rank: the process, the tails of
its events/stdout/stderr files, what it has said so far (joined, trained,
reported steps, its last lines) and how it ended.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import IO

from ddpstudio.core import protocol
from ddpstudio.core.launch.lossparse import LossScraper
from ddpstudio.core.launch.outcome import LAST_LINES
from ddpstudio.core.launch.rootcause import StderrTail
from ddpstudio.core.launch.scriptsteps import MAX_MARKS
from ddpstudio.core.launch.tail import LineTail


class RunState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    FINISHED = protocol.FINISHED
    FAILED = protocol.FAILED
    STOPPED = protocol.STOPPED
    NOTHING_TRAINED = protocol.NOTHING_TRAINED
    NOT_DISTRIBUTED = protocol.NOT_DISTRIBUTED


@dataclass
class RankProc:
    rank: int
    proc: object
    events: LineTail
    out: LineTail
    err: LineTail
    files: list[IO]
    parser: protocol.EventParser = field(default_factory=protocol.EventParser)
    stderr: StderrTail = field(default_factory=StderrTail)
    scraper: LossScraper | None = None
    joined: bool = False
    reports_steps: bool = False  # ddpstudio.report.step: its printed losses are not read
    observed_step: int | None = None  # the last step the rank helper saw: printed training losses are not read
    # (step, stdout size, stderr size) as the helper's step events said them: where an evaluation line belongs
    marks: deque = field(default_factory=lambda: deque(maxlen=MAX_MARKS))
    speaks: bool = False  # wrote protocol events (the reporter): its silence at the rendezvous means a stall
    exit_code: int | None = None
    error_t: float | None = None
    stated: str = ""  # an error the rank stated in full (the user's data, a checkpoint): the root cause as it is
    created: float | None = None  # create time: with the pid, identifies the rank in the registry
    # Seen from inside (issue 11): the rank helper watches it, so it joins by rank_joined only, never
    # by a first printed loss (a script that logs on rank 0 only has silent ranks that did join).
    watched: bool = False
    in_group: bool = False  # said rank_joined: initialised its process group
    left: bool = False  # said rank_left (destroy_process_group) and has not joined again: done training
    joined_rank: int | None = None  # the rank it said it joined as (a spawn-style script's own process may be one)
    joined_pids: set = field(default_factory=set)  # the processes that joined as this rank (more than one: copies)
    seen_t: float | None = None  # when it was first seen from inside (watched, spoke or joined): past its imports
    torchless: bool = False  # the rank helper saw it exit without importing torch (rank_no_torch)
    trained: bool = False  # took (the rank helper saw it), reported or printed a training step
    last: deque = field(default_factory=lambda: deque(maxlen=LAST_LINES))  # its last output lines

    def last_lines(self) -> list[str]:
        return list(self.last)
