"""Which rank is stuck: the ranks' heartbeats judged, and the finding in words (issue 25 §3).

A rank that hangs mid-training (a dead disk, a deadlock, a driver reset)
leaves the others waiting in a collective until Gloo's timeout (30 minutes by
default); PyTorch's flight recorder and async error handling cover NCCL only.
Every rank beats its step and phase (rank/heartbeat.py). A rank is *still*
when its phase has not changed for a while (the beat says how long), or its
beats stopped coming. When the rank that stopped first has been still for the
hang timeout and every other rank is still too (they wait for it), that rank
is stuck. Only once every rank beats: before its first step a rank sets up
(rank 0 downloads a data set while the others wait at a barrier), and that is
not judged; nor while a rank's beat says it is compiling (torch.compile). Which one stopped first: the lowest step, then one that is not
waiting in an exchange, then the earliest to stop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core import protocol

# What a rank can be doing: rank/heartbeat.py marks them (light to import there: standard library only).
SCRIPT, DATA, FORWARD, BACKWARD, OPTIMIZER, EXCHANGE, CHECKPOINT, EVAL = (
    "script", "data", "forward", "backward", "optimizer", "exchange", "checkpoint", "eval")
# Phases in words ("rank 1 stuck in the data loader"); rank/heartbeat.py names them.
PHASE_WORDS = {"data": "in the data loader", "forward": "in the forward pass", "backward": "in the backward pass",
               "optimizer": "in the optimizer step", "exchange": "in a collective (waiting for the other ranks?)",
               "checkpoint": "saving a checkpoint", "eval": "in the evaluation", "script": "in the script's own code"}
# Where a rank waits for its peers: DDP's gradient exchange runs inside backward, collectives are exchanges.
WAITING = frozenset({"backward", "exchange"})
ON_HANG = ("warn", "stop")  # --on-hang: say it (and offer Stop), or end the run failed
MOVED_S = 0.05  # a later phase start than this is a move (not the rounding of two beats of the same phase)


def beat_file(events_dir: str | os.PathLike, rank: int) -> Path:
    """Where rank ``rank`` beats: beside its events file, written by its heartbeat thread alone."""
    return Path(events_dir) / f"rank{rank}.beats"


def dump_request(events_dir: str | os.PathLike, rank: int) -> Path:
    """The file whose appearance asks rank ``rank`` for its Python stack (on its stderr, the rank's log)."""
    return Path(events_dir) / f"rank{rank}.dump"


def watches_hangs(plan) -> bool:
    """The hang watch runs for one machine's ranks that are ours (not a spawn-style script's own children):
    the launcher of one machine of several sees only its own ranks, and could not tell who waits for whom."""
    return plan.hang_timeout > 0 and plan.nodes == 1 and not (plan.script and plan.script.style == "spawn")


def beat_interval(timeout: float) -> float:
    """Seconds between heartbeats: a tenth of the timeout, from half a second to five."""
    return min(5.0, max(0.5, timeout / 10))


@dataclass
class Beat:
    """A rank's latest heartbeat, on the launcher's clock."""

    step: int
    phase: str
    moved_t: float  # when the rank entered this phase: the beat's time minus the seconds it had been in it
    by_signal: bool = False  # SIGUSR1 dumps its stack (POSIX, faulthandler.register)
    compiling: bool = False  # inside torch.compile's compiler (rank/heartbeat.py looks at its stack)


@dataclass(frozen=True)
class Stuck:
    """The finding: which rank, at which step, doing what, for how long, and who waits for it."""

    rank: int
    step: int
    phase: str
    still_s: float
    waiting: tuple[int, ...]
    by_signal: bool = False  # ask for its stack with SIGUSR1, not the dump-request file

    def words(self) -> str:
        """'rank 1 stuck in the data loader at step 812': the run's summary with --on-hang stop."""
        return f"rank {self.rank} stuck {PHASE_WORDS.get(self.phase, f'in {self.phase}')} at step {self.step}"

    def message(self, log: str) -> str:
        others = f" while rank(s) {', '.join(map(str, self.waiting))} wait" if self.waiting else ""
        return (f"{self.words()}: no progress for {self.still_s:.0f} s{others}; its Python stack is in {log}")

    def event(self, log: str, action: str) -> protocol.Event:
        return protocol.make_event(protocol.RANK_STUCK, rank=self.rank, step=self.step, phase=self.phase,
                                   still_s=round(self.still_s, 1), waiting=list(self.waiting), log=log,
                                   action=action, message=self.message(log))


class HangWatch:
    """The ranks' latest beats; :meth:`stuck` says when one of them holds up the rest."""

    def __init__(self, timeout: float) -> None:
        self.timeout, self.interval = timeout, beat_interval(timeout)
        self.beats: dict[int, Beat] = {}
        self.named: set[int] = set()  # ranks already reported stuck, until they move again

    def feed(self, event: protocol.Event) -> None:
        """One heartbeat line. Its time is the rank's clock, this machine's (the watch is for one machine's ranks)."""
        still = event.get("still_s")
        if event.rank is None or not isinstance(still, (int, float)):
            return
        beat = Beat(int(event.get("step") or 0), str(event.get("phase") or ""), event.t - float(still),
                    event.get("by_signal") is True, event.get("compiling") is True)
        before = self.beats.get(event.rank)
        if before is not None and beat.moved_t > before.moved_t + MOVED_S:
            self.named.discard(event.rank)  # it moved: a new stall is news again
        self.beats[event.rank] = beat

    def forget(self) -> None:
        """A restarted group beats afresh."""
        self.beats.clear()
        self.named.clear()

    def stuck(self, now: float, live: set[int]) -> Stuck | None:
        """The rank holding up the others, once per stall; None while every rank moves (or waits too briefly)."""
        beats = {rank: beat for rank, beat in self.beats.items() if rank in live}
        if not beats or len(beats) < len(live):
            return None  # a rank that has not begun training yet: the others may wait for its setup
        if any(b.compiling for b in beats.values()):
            return None  # torch.compile at work (a minute is common): busy, and the others wait for it
        first = min(beats, key=lambda r: (beats[r].step, beats[r].phase in WAITING, beats[r].moved_t))
        beat = beats[first]
        if first in self.named or now - beat.moved_t < self.timeout:
            return None
        # The others wait: none moved for two beats (a rank that trains changes phase every step).
        if any(now - b.moved_t < 2 * self.interval for r, b in beats.items() if r != first):
            return None
        self.named.add(first)
        return Stuck(first, beat.step, beat.phase, now - beat.moved_t, tuple(sorted(set(live) - {first})),
                     beat.by_signal)


def stuck_words(event: protocol.Event, stop: str) -> str:
    """A ``rank_stuck`` event in words: the CLI's line and the window's log (``stop``: how to stop it there)."""
    if event.get("action") == "stop":
        return f"stuck: {event.get('message')}; ending the run (--on-hang stop)"
    return f"stuck: {event.get('message')}; the others keep waiting ({stop} to stop the run)"
