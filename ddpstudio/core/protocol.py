"""The metrics protocol: versioned, typed JSON lines (docs/protocol.md).

Ranks write events, the launcher merges them onto its stdout, and every front
end (CLI, GUI, benchmarks) reads them through :class:`EventParser`. Standard
library only: this module is imported inside training ranks.
"""

from __future__ import annotations

import json
import json.encoder
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping

_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=True)
# The same C encoder ``JSONEncoder.encode`` builds on every call (Lib/json/encoder.py ``iterencode``:
# ``_iterencode = c_make_encoder(markers, ...)`` each time), built once: the launcher encodes about five
# objects per line a rank prints (issue 20). ``markers`` None skips the circular-reference check only:
# events and history rows are flat and made here, never circular.
_C_ENCODE = (json.encoder.c_make_encoder(None, _ENCODER.default, json.encoder.encode_basestring_ascii, None,
                                         ":", ",", False, False, True)
             if json.encoder.c_make_encoder is not None else None)


def encode(obj: Any) -> str:
    """What ``json.dumps(obj, separators=(",", ":"), allow_nan=True)`` gives, byte for byte, faster."""
    if _C_ENCODE is None or isinstance(obj, str):  # no C accelerator; a bare string takes another path
        return _ENCODER.encode(obj)
    return "".join(_C_ENCODE(obj, 0))


_DECODER = json.JSONDecoder()  # what json.loads uses when given no options

SCHEMA_VERSION = 1

# The launcher sets this for every rank; ranks append their events under it.
EVENTS_DIR_ENV = "DDPSTUDIO_EVENTS_DIR"
# The file whose appearance asks every rank to stop (no console needed: Windows, pythonw).
STOP_FILE_ENV = "DDPSTUDIO_STOP_FILE"
# The read end of the launcher's lifeline pipe (POSIX): end-of-file means the launcher is gone.
LIFELINE_FD_ENV = "DDPSTUDIO_LIFELINE_FD"
# "No NCCL here" for a script's ranks: the rank helper gives a script that asks for NCCL Gloo instead
# (rank/ncclswap.py). The launcher sets it to NO_NCCL_WINDOWS from its Platform, or NO_NCCL_NO_GPU for a run
# on the CPU; tests set it on Linux.
NO_NCCL_ENV = "DDPSTUDIO_NO_NCCL"
NO_NCCL_WINDOWS = "windows"
NO_NCCL_NO_GPU = "no-gpu"  # the run is on the CPU: NCCL needs CUDA GPUs
# How the rank helper's own lines start in a script rank's stderr (rank/script_hooks.py, rank/helper/).
HELPER_SAYS = "ddpstudio rank helper: "
# Seconds between a rank's heartbeats (rank/heartbeat.py); set only when the launcher watches for hangs.
HEARTBEAT_ENV = "DDPSTUDIO_HEARTBEAT_S"

RUN_STARTED = "run_started"
RANK_STARTED = "rank_started"
RANK_MEETING = "rank_meeting"  # a rank called init_process_group: Python and torch are up, it waits for the rest
RANK_JOINED = "rank_joined"
RANK_LEFT = "rank_left"  # a script's rank called destroy_process_group (reported by the rank helper)
RANK_WATCHED = "rank_watched"  # the rank helper saw a script's rank import torch.distributed
RANK_NO_TORCH = "rank_no_torch"  # the rank helper saw a script's rank exit without importing torch
STEP = "step"
OBSERVED = "observed"  # a step event's source: the rank helper saw the step and its loss (rank/steploss.py)
GLOBAL_STEP = "global_step"
EPOCH_END = "epoch_end"
CHECKPOINT_SAVED = "checkpoint_saved"
LOG = "log"
WARNING = "warning"
ERROR = "error"
RANK_EXITED = "rank_exited"
RUN_FINISHED = "run_finished"
EVAL = "eval"
MODEL_SAVED = "model_saved"
JOIN_CODE = "join_code"  # a multi-machine host's code for the other machines (cli/host.py; holds the token)
RUN_RESTARTED = "run_restarted"  # a rank died and the launcher started the group again (core/launch/restart.py)
HEARTBEAT = "heartbeat"  # a rank's step and phase, in its beat file only: the launcher reads it (rank/heartbeat.py)
BATCH_BALANCED = "batch_balanced"  # each rank's batch, measured for its speed (rank/balance.py, issue 25 §1)
RANK_STUCK = "rank_stuck"  # a rank made no progress while the others waited (core/launch/hangs.py)

KNOWN_TYPES = frozenset(
    {
        RUN_STARTED,
        RANK_STARTED,
        RANK_MEETING,
        RANK_JOINED,
        RANK_LEFT,
        RANK_WATCHED,
        RANK_NO_TORCH,
        STEP,
        GLOBAL_STEP,
        EPOCH_END,
        CHECKPOINT_SAVED,
        LOG,
        WARNING,
        ERROR,
        RANK_EXITED,
        RUN_FINISHED,
        EVAL,
        MODEL_SAVED,
        JOIN_CODE,
        RUN_RESTARTED,
        HEARTBEAT,
        RANK_STUCK,
        BATCH_BALANCED,
    }
)

class Outcome(StrEnum):
    """How a run ended: the ``state`` of run_finished, result.json and the registry (docs/protocol.md)."""

    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    NOTHING_TRAINED = "nothing_trained"  # the ranks joined, exited 0, and no rank trained a step
    NOT_DISTRIBUTED = "not_distributed"  # seen by the rank helper, no rank ever initialised a process group


# Final states carried by run_finished (and the launcher's exit code; 2 is "refused, nothing started").
FINISHED = Outcome.FINISHED
FAILED = Outcome.FAILED
STOPPED = Outcome.STOPPED
NOTHING_TRAINED = Outcome.NOTHING_TRAINED
NOT_DISTRIBUTED = Outcome.NOT_DISTRIBUTED
EXIT_CODES = {FINISHED: 0, FAILED: 1, STOPPED: 3, NOTHING_TRAINED: 4, NOT_DISTRIBUTED: 5}
# What each outcome is called where people read it (CLI, window, runs list).
OUTCOME_TEXT = {FINISHED: "finished", FAILED: "failed", STOPPED: "stopped",
                NOTHING_TRAINED: "finished, but nothing trained", NOT_DISTRIBUTED: "not a distributed script"}


def outcome_text(state: str | None) -> str:
    """An outcome in words ("not a distributed script"); any other state as it is."""
    return OUTCOME_TEXT.get(state, state or "unknown")  # type: ignore[arg-type]


@dataclass(frozen=True)
class Event:
    type: str
    v: int
    t: float
    rank: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, type: str, v: int, t: float, rank: int | None = None,  # noqa: A002 - the field's name
                 data: Mapping[str, Any] | None = None) -> None:
        # The fields in one dict update, not a frozen dataclass's object.__setattr__ per field: the
        # launcher makes three events per line a script prints, the CLI reads them (issue 20).
        self.__dict__.update(type=type, v=v, t=t, rank=rank, data={} if data is None else data)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "v": self.v, "t": self.t}
        if self.rank is not None:
            out["rank"] = self.rank
        out.update(self.data)
        return out

    def to_line(self) -> str:
        return encode(self.to_dict())


def make_event(type_: str, rank: int | None = None, t: float | None = None, **data: Any) -> Event:
    return Event(type_, SCHEMA_VERSION, time.time() if t is None else t, rank, data)


class EventParser:
    """Turns lines into :class:`Event` objects; the one parser every consumer uses.

    Lines that are not JSON objects, or lack ``type``/``v``, give nothing.
    Unknown types are skipped. An event from a newer schema version is still
    parsed (fields we know keep their meaning); the first one also yields a
    synthetic ``warning`` event, once.
    """

    def __init__(self) -> None:
        self.newer_version_seen: int | None = None
        self.skipped_unknown = 0

    def feed(self, line: str | bytes) -> list[Event]:
        """The events in one line: none, one, or one plus a newer-version warning."""
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        line = line.strip()
        if not line.startswith("{"):
            return []
        try:
            # json.loads minus its two whitespace matches (the line is stripped) and its layers: the decoder's
            # C scanner, the whole line or nothing, as loads does (Lib/json/decoder.py ``decode``: "Extra data").
            # The CLI parses two events per line a script prints (issue 20).
            raw, end = _DECODER.raw_decode(line)
        except ValueError:
            return []
        if end != len(line):
            return []
        if not isinstance(raw, dict):
            return []
        type_, v = raw.pop("type", None), raw.pop("v", None)
        if not isinstance(type_, str) or not isinstance(v, int) or isinstance(v, bool):
            return []
        t = raw.pop("t", None)
        rank = raw.pop("rank", None)
        out: list[Event] = []
        if v > SCHEMA_VERSION and self.newer_version_seen is None:
            self.newer_version_seen = v
            out.append(make_event(
                WARNING,
                message=f"events use schema version {v}, newer than this DDP Studio understands "
                f"({SCHEMA_VERSION}); update DDP Studio. Known fields are still shown.",
            ))
        if type_ not in KNOWN_TYPES:
            self.skipped_unknown += 1
            return out
        out.append(Event(type_, v, float(t) if isinstance(t, (int, float)) else time.time(),
                         rank if isinstance(rank, int) and not isinstance(rank, bool) else None, raw))
        return out
