"""A user script's steps as the run's steps: each step counted once per rank, and the mean over ranks.

The built-in recipe all-reduces its loss and emits ``global_step`` itself; a
script does not, so the launcher makes that curve from the ranks' ``step``
events (``report.step`` or scraped lines): the mean of the ranks' losses (and
of the samples/s they reported) by step number.

A step may arrive twice from one rank: printed (``loss: 0.5``, scraped) and
reported (``report.step(3, 0.5)``) or observed (the rank helper saw the
optimizer step and the loss of its backward passes, rank/steploss.py).
Reported steps win over both, observed ones over printed ones: a rank's
scraped step is held back for ``HOLD_S`` and dropped if the rank has reported
or observed steps by then (the launcher reads every events file before the
output logs), and a reported or observed value replaces a scraped one for
the mean; a rank's observed steps are ignored once it reports its own.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, NamedTuple

from ddpstudio.core import protocol

HOLD_S = 0.5  # how long a scraped step waits for a report.step of the same rank
SETTLE_STEPS = 2  # a step's mean is final once all ranks gave it, or this many later steps were seen
LAG_WAIT_S = 2.0  # ... and no rank that gives steps is behind it, or it has waited this long for such a rank
CARRIED = ("total_steps", "epoch", "lr")  # report.step extras the global step passes on (rank 0's first)


# Tuples, not frozen dataclasses: one of each per line a script prints, and a frozen dataclass's __init__
# sets each field through object.__setattr__ (issue 20: the launcher's CPU per line).
class Value(NamedTuple):
    """One rank's reading of one step."""

    loss: float | None
    samples_per_s: float | None
    reported: bool  # from report.step (True) or from a scraped line (False)
    extra: dict[str, Any]


class Held(NamedTuple):
    """A scraped step waiting to learn whether its rank reports steps itself."""

    event: protocol.Event
    read_t: float


class ScriptSteps:
    """Per run: ``reported``/``scraped`` in; out come the scraped steps to emit (``release``) and, once
    per pass over the ranks, the global steps now complete (``settle``)."""

    def __init__(self, world_size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.world_size = world_size
        self._clock = clock
        self._pending: dict[int, dict[int, Value]] = {}  # step -> rank -> value
        self._last_global: int | None = None
        self._held: dict[int, list[Held]] = {}
        self._reporters: set[int] = set()
        self._latest: dict[int, int] = {}  # rank -> the highest step it gave: the ranks that give steps
        self._first_seen: dict[int, float] = {}  # step -> when its first value came (``clock``)

    # -- in ------------------------------------------------------------------
    def reported(self, ev: protocol.Event) -> None:
        """A rank's own ``step`` event, reported or observed (the launcher emits it as it is)."""
        if ev.rank is None:
            return
        if ev.get("source") != protocol.OBSERVED:
            if ev.rank not in self._reporters:
                self._reporters.add(ev.rank)
                for step, values in list(self._pending.items()):  # the helper's, before the script's first report
                    if values.pop(ev.rank, None) is not None and not values:
                        del self._pending[step]
        elif ev.rank in self._reporters:
            return
        held = self._held.pop(ev.rank, [])  # its scraped steps are the same steps, printed; its evaluations stay
        if held and ev.rank not in self._reporters:
            self._held[ev.rank] = [h for h in held if h.event.type != protocol.STEP]
        self._add(ev, reported=True)

    def scraped(self, ev: protocol.Event, now: float) -> None:
        """A ``step`` (or ``eval``, kept in order with the steps) read from a rank's output: held until
        :meth:`release` decides."""
        if ev.rank is not None and ev.rank not in self._reporters:
            self._held.setdefault(ev.rank, []).append(Held(ev, now))

    def printed(self, ev: protocol.Event) -> None:
        """A scraped step counted as it is, without being held."""
        self._add(ev, reported=False)

    def held_ranks(self) -> list[int]:
        return [rank for rank, held in self._held.items() if held]

    def release(self, rank: int, now: float, final: bool = False) -> list[protocol.Event]:
        """The rank's scraped steps held long enough (all with ``final``): to emit."""
        held = self._held.get(rank, [])
        # Held in the order read (read_t grows): the ready ones are the first, and the scan stops at the first
        # that is not, instead of going over a second's worth of lines at every poll.
        count = len(held) if final else next((i for i, h in enumerate(held) if now - h.read_t < HOLD_S), len(held))
        if not count:
            return []
        ready, self._held[rank] = held[:count], held[count:]
        for h in ready:
            if h.event.type == protocol.STEP:
                self._add(h.event, reported=False)
        return [h.event for h in ready]

    # -- the mean ------------------------------------------------------------
    def _add(self, ev: protocol.Event, reported: bool) -> None:
        step = ev.get("step")
        if not isinstance(step, (int, float)) or isinstance(step, bool):
            return
        step = int(step)
        if self._last_global is not None and step <= self._last_global:
            return  # that step's mean is out already
        if step not in self._pending:
            self._first_seen[step] = self._clock()
        values = self._pending.setdefault(step, {})
        if ev.rank is not None:
            self._latest[ev.rank] = max(step, self._latest.get(ev.rank, step))
        old = values.get(ev.rank)
        if old is None or reported or not old.reported:
            data = ev.data
            values[ev.rank] = Value(_number(data.get("loss")), _number(data.get("samples_per_s")), reported,
                                    {k: data[k] for k in CARRIED if data.get(k) is not None})

    def settle(self, final: bool = False) -> list[protocol.Event]:
        """The global steps now complete, in step order; ``final`` (the run is over): all that wait,
        each the mean of the ranks that gave it.

        A step is complete once every rank gave it; or once ``SETTLE_STEPS`` later steps were seen (a script
        that prints on rank 0 only), unless a rank that gives steps has not reached it yet: its values are read
        later (its file in the next pass), and the mean waits for them up to ``LAG_WAIT_S`` (helper trial,
        2026-12-07: three global steps were rank 1's loss alone while rank 0's same steps were one read behind).
        Called after a pass over every rank, so that one rank's burst of steps does not settle them
        before the other ranks' files were read."""
        now = self._clock()
        out = []
        steps = sorted(self._pending)
        for i, step in enumerate(steps):
            values = self._pending[step]
            if not (final or len(values) >= self.world_size
                    or (len(steps) - 1 - i >= SETTLE_STEPS and not self._lagging(step, values, now))):
                break  # steps come out in order: a later one waits for this one
            out.append(_global(step, values))
            del self._pending[step]
            self._first_seen.pop(step, None)
            self._last_global = step
        return out

    def _lagging(self, step: int, values: dict[int, Value], now: float) -> bool:
        """Does a rank that gives steps, missing from ``step``, still come before it (within the wait)?"""
        if now - self._first_seen.get(step, now) >= LAG_WAIT_S:
            return False
        return any(latest < step for rank, latest in self._latest.items() if rank not in values)


def took_step(rank: Any, ev: protocol.Event) -> bool:
    """A rank's own ``step`` event, noted on ``rank`` (its ``reports_steps``, ``observed_step`` and ``marks``):
    False for the helper's step of a script that reports its steps itself, which is dropped."""
    if ev.get("source") != protocol.OBSERVED:
        rank.reports_steps = True
        return True
    if rank.reports_steps:
        return False
    rank.observed_step = ev.get("step")
    if ev.get("out_at") is not None or ev.get("err_at") is not None:
        rank.marks.append((rank.observed_step, ev.get("out_at"), ev.get("err_at")))
    return True


MAX_MARKS = 512  # a rank's latest step marks kept (reports come at most about 20 a second after the first 50)


def step_at(marks: Any, at: tuple[str, int] | None) -> int | None:
    """The step after which the line at ``at`` (``(stream, offset)``) was printed: the last step whose mark (how
    much the rank had written when the step closed: rank/steploss.py ``output_at``) is at or before it; 0 for a
    line printed before the first step; None where the marks cannot tell (no offsets, or older than those kept)."""
    if at is None or not marks:
        return None
    index = 1 if at[0] == "stdout" else 2
    for mark in reversed(marks):
        if mark[index] is not None and mark[index] <= at[1]:
            return mark[0]
    first = marks[0]
    return 0 if first[0] == 1 and first[index] is not None else None  # before step 1 (the first mark is kept)


def scraped_event(rank: Any, tag: Any, found: Any) -> protocol.Event | None:
    """The event a loss read from a rank's output makes (``found``: lossparse's ``Scraped``), named ``tag``: an
    evaluation at the step it was printed after (by the rank helper's marks; else the step the helper last saw,
    or the scraper's count), or a printed training step, None when the helper sees the rank's steps itself (the
    same step with its exact loss). The helper's last step is where the launcher has read to, which may be
    steps past the line (helper trial, 2026-12-07: Ignite's evaluation after step 24 stamped 31 to 48)."""
    if found.eval:
        if rank.observed_step is None:
            step = found.step
        else:
            placed = step_at(rank.marks, found.at)
            step = rank.observed_step if placed is None else placed
        return protocol.make_event(protocol.EVAL, rank=tag, step=step, loss=found.loss, source="scraped")
    if rank.observed_step is not None:
        return None
    return protocol.make_event(protocol.STEP, rank=tag, step=found.step, loss=found.loss, source="scraped")


def _global(step: int, values: dict[int, Value]) -> protocol.Event:
    losses = [v.loss for v in values.values() if v.loss is not None]
    rates = [v.samples_per_s for v in values.values() if v.samples_per_s is not None]
    extra: dict[str, Any] = {}
    for rank in sorted(values):
        extra = {**values[rank].extra, **extra}
    return protocol.make_event(
        protocol.GLOBAL_STEP, step=step, loss=sum(losses) / len(losses) if losses else None,
        samples_per_s=sum(rates) / len(rates) if rates else None, ranks=len(values), source="script",
        **extra)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
