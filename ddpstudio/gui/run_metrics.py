"""What one run has reported, as plot series and progress: the view-model of the live plots.

Fed with protocol events (dispatched by type to ``_handle_<type>``), from the
launcher's stdout while a run is live or from ``events.jsonl`` when a past run
is reopened: both go through the same code.
"""

from __future__ import annotations

import time
from collections import deque

from ddpstudio.core import protocol
from ddpstudio.gui.series import Series

ETA_WINDOW = 30  # global steps the ETA is measured over


POINTS = 1024  # per curve: several points per pixel of a plot, and a fixed cost to draw


class RunMetrics:
    def __init__(self, capacity: int = POINTS) -> None:
        self.capacity = capacity
        self.loss: dict[int, Series] = {}  # per rank, against step
        self.global_loss = Series(capacity)
        self.samples_per_s = Series(capacity)  # global, against step
        self.lr = Series(capacity)  # the recipe's learning rate, against step
        self.eval_loss = Series(capacity)  # validation, against step
        self.eval_top1 = Series(capacity)  # validation accuracy in %, against step
        self.eval_top5 = Series(capacity)
        self.evals: list[dict] = []  # every eval event's fields, for the summary card
        self.started_t: float | None = None  # wall time of run_started: the start is told against it
        self.machines = 1  # a multi-machine host's node count (from its join code): it waits for the others first
        self.machines_in = 1  # of those, the machines that have joined (the host's own counts)
        self.meeting: set[int] = set()  # ranks (or, before they know their rank, pids) in init_process_group
        self.joined: set[int] = set()  # ranks that finished init_process_group
        self.first_step_t: float | None = None
        self.model_path: str | None = None
        self.info: dict = {}  # the run_started event's fields
        self.final: dict | None = None  # the run_finished event's fields
        self.pids: dict[int, int] = {}
        self.errors: list[protocol.Event] = []
        self.warnings: list[str] = []
        self.step = 0
        self.total_steps: int | None = None
        self.data_wait_fraction: float | None = None
        self.checkpoints: list[str] = []
        self.restarts = 0  # run_restarted: the group started again after a crash
        self._recent: deque[tuple[float, int]] = deque(maxlen=ETA_WINDOW)
        self.version = 0

    # -- feeding ---------------------------------------------------------------
    def feed(self, event: protocol.Event) -> None:
        handler = getattr(self, f"_handle_{event.type}", None)
        if handler is not None:
            handler(event)
            self.version += 1

    def _rank_series(self, rank: int) -> Series:
        if rank not in self.loss:
            self.loss[rank] = Series(self.capacity)
        return self.loss[rank]

    def _handle_run_started(self, ev: protocol.Event) -> None:
        self.info = dict(ev.data)
        self.started_t = ev.t
        self.total_steps = ev.get("max_steps") or self.total_steps

    def _handle_rank_started(self, ev: protocol.Event) -> None:
        if ev.rank is not None and isinstance(ev.get("pid"), int):
            self.pids[ev.rank] = ev.get("pid")

    def _handle_step(self, ev: protocol.Event) -> None:
        if ev.rank is None:
            return
        step = ev.get("step")
        if isinstance(step, (int, float)):
            self._rank_series(ev.rank).append(step, _number(ev.get("loss")))
            if ev.get("source") in ("scraped", protocol.OBSERVED) and ev.rank == 0:
                self._advance(int(step), ev.t)  # scripts without the reporter: rank 0 sets the pace

    def _handle_global_step(self, ev: protocol.Event) -> None:
        step = ev.get("step")
        if not isinstance(step, (int, float)):
            return
        self.global_loss.append(step, _number(ev.get("loss")))
        rate = _number(ev.get("samples_per_s"))
        if rate is not None:
            self.samples_per_s.append(step, rate)
        self.total_steps = ev.get("total_steps") or self.total_steps
        lr = _number(ev.get("lr"))
        if lr is not None:
            self.lr.append(step, lr)
        self._advance(int(step), ev.t)

    def _handle_rank_meeting(self, ev: protocol.Event) -> None:
        self.meeting.add(ev.rank if ev.rank is not None else ev.get("pid"))

    def _handle_rank_joined(self, ev: protocol.Event) -> None:
        if ev.rank is not None:
            self.joined.add(ev.rank)
        if isinstance(ev.get("world_size"), int):  # the real one, over what was asked (spawn style: unknown)
            self.info["world_size"] = ev.get("world_size")

    def _handle_model_saved(self, ev: protocol.Event) -> None:
        self.model_path = str(ev.get("path"))

    def _handle_eval(self, ev: protocol.Event) -> None:
        step = ev.get("step")
        if not isinstance(step, (int, float)):
            return
        self.evals.append(dict(ev.data))
        self.eval_loss.append(step, _number(ev.get("loss")))
        for series, key in ((self.eval_top1, "top1"), (self.eval_top5, "top5")):
            value = _number(ev.get(key))
            if value is not None:
                series.append(step, 100 * value)

    def _handle_epoch_end(self, ev: protocol.Event) -> None:
        wait = _number(ev.get("data_wait_fraction"))
        if wait is not None:
            self.data_wait_fraction = wait

    def _handle_checkpoint_saved(self, ev: protocol.Event) -> None:
        self.checkpoints.append(str(ev.get("path")))

    def _handle_run_restarted(self, ev: protocol.Event) -> None:
        """The group starts again from ``from_step``: the steps after it come again, so the curves continue
        from there (not a line back to the start of the redone steps)."""
        step = ev.get("from_step")
        if not isinstance(step, int):
            return
        for series in (*self.loss.values(), self.global_loss, self.samples_per_s, self.lr, self.eval_loss,
                       self.eval_top1, self.eval_top5):
            series.drop_after(step)
        self.restarts = int(ev.get("restart") or 0)
        self.step = step
        self._recent.clear()  # the ETA is measured again from the resumed steps

    def _handle_warning(self, ev: protocol.Event) -> None:
        self.warnings.append(str(ev.get("message", "")))

    def _handle_error(self, ev: protocol.Event) -> None:
        self.errors.append(ev)

    def _handle_run_finished(self, ev: protocol.Event) -> None:
        self.final = dict(ev.data)

    def _advance(self, step: int, t: float) -> None:
        if self.first_step_t is None:
            self.first_step_t = t
        self.step = max(self.step, step)
        self._recent.append((t, step))

    # -- reading -------------------------------------------------------------
    @property
    def state(self) -> str | None:
        return self.final.get("state") if self.final else None

    def fraction(self) -> float | None:
        if not self.total_steps:
            return None
        return min(1.0, self.step / self.total_steps)

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left at the pace of the last steps; None while unknown."""
        if not self.total_steps or len(self._recent) < 2 or self.final is not None:
            return None
        (t0, s0), (t1, s1) = self._recent[0], self._recent[-1]
        if s1 <= s0 or t1 <= t0:
            return None
        pace = (t1 - t0) / (s1 - s0)
        since_last = max(0.0, (now if now is not None else time.time()) - t1)
        return max(0.0, (self.total_steps - s1) * pace - since_last)


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

