"""A user's script's steps and losses, seen from outside: the loss each step's backward passes ran on.

Many scripts print their loss rarely or in a form no line reader can take:
Lightning's rich progress bar draws only at the end when its output is no
terminal, Hugging Face's Trainer logs every 500 steps by default, a script may
print every 100 steps or only per epoch. The rank helper installs this once the
script's process group exists (the taps: :mod:`ddpstudio.rank.stepwatch`), so
every such script has a loss curve and its run counts as trained:

- ``Tensor.backward`` on a one-element tensor with no gradient given notes
  that tensor (detached: no graph is kept). One scaled by a ``GradScaler``
  is noted as the loss it scaled (``GradScaler.scale`` marks its result).
- an optimizer step (torch's global post hook) closes the step: its loss is
  the sum of the noted tensors since the previous step, which is the mean
  loss when the script divides by its accumulation steps before backward, as
  Lightning and Accelerate do (Transformers 5's Trainer may not: then the sum,
  which it logs too). With several optimizers, the run's
  steps are those of the first that stepped (a GAN's discriminator; Muon's
  half of a Muon + AdamW pair); every step clears the noted losses.
- a step a ``GradScaler`` skipped (inf or NaN gradients) is no step.
- each training forward of a ``DistributedDataParallel`` model (training
  mode, gradients on) counts its batch's samples (the first dimension of the
  first tensor among its arguments), once per backward pass (a model
  forwarded twice for one loss, two views of a batch, is one batch), so a
  report carries the run's samples/s:
  this rank's samples since the last report over the time since then, times
  the world size (``report.step``'s convention). The first report has none:
  its time includes the script's set-up.

The first ``EVERY_STEP`` steps are each reported; after them at most about
``REPORTS_PER_S`` a second, every ``stride``-th step with the mean loss since
the last report; the stride is a power of two from the measured step time, so
ranks in step pick the same steps. Values on a GPU are copied to the host without waiting
(``non_blocking`` into pinned memory, an event recorded after it) and
emitted once that event says the copy is done: no step waits for the GPU.
A report on the host is emitted at once, before the script prints that step's
loss, so the launcher takes the step from here and not from the line. Each
report also says how much the rank had written to its output files when the
step closed (``out_at``, ``err_at``): an evaluation line at a larger offset
is placed after this step, however late the launcher reads it. A
script that reports its steps itself (``ddpstudio.report.step``) gets none
of these: while it has imported ``ddpstudio.report`` but not reported a step,
the reports wait (until the end, or ``MAX_QUEUED`` of them), and once it
has, they are dropped.
"""

from __future__ import annotations

import math
import os
import stat
import sys
import time
import weakref
from collections import deque
from typing import Any, Callable

from ddpstudio.core import protocol
from ddpstudio.rank.emit import Emitter

UNSCALED = "_ddpstudio_unscaled"  # on a GradScaler's result: the loss it scaled
REPORTS_PER_S = 20
EVERY_STEP = 50  # the first steps are each reported: a short run's curve has all of them
MAX_STRIDE = 1 << 12
MAX_QUEUED = 1000  # reports held while a script that imported the reporter has not reported a step
REPORTS, MAY_REPORT = "reports", "may report"
MAX_NOTED = 256  # backward passes without an optimizer step (a script that updates by hand): folded


class _Report:
    """A reported step whose loss may still be on its way from the GPU."""

    __slots__ = ("step", "steps", "value", "samples", "rate", "copied", "at")

    def __init__(self, step: int, steps: int, value: Any, samples: int, rate: float | None,
                 copied: Any = None) -> None:
        self.step, self.steps, self.value, self.samples, self.rate = step, steps, value, samples, rate
        self.copied = copied  # a CUDA event, when the value is on its way from the GPU
        self.at: dict[str, int] = {}  # how much the rank had written to its output files when the step closed

    def ready(self, wait: bool) -> bool:
        if self.copied is not None and wait:
            self.copied.synchronize()
        return self.copied is None or wait or self.copied.query()


class StepLosses:
    """Per process: the noted losses of the step under way, the steps since the last report, and the reports
    not yet emitted."""

    def __init__(self, emitter: Emitter, world_size: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        self.emitter, self.world_size, self.clock = emitter, world_size, clock
        self.samples = 0  # training samples forwarded since the last report
        self.batch_counted = False  # a forward since the last backward pass was counted
        self.noted: list[Any] = []  # this step's losses (detached tensors)
        self.window: list[Any] = []  # the losses of the steps since the last report
        self.window_steps = 0
        self.step = 0  # steps of the primary optimizer
        self.stepped = 0  # steps of any optimizer (a GradScaler's skipped step is told by it not moving)
        self.stride = 1
        self.since: float | None = None  # when the last report was made (none yet: the first has no rate)
        self.primary: weakref.ref | None = None
        self.queue: deque[_Report] = deque()
        self.off = False

    # -- what the script does ------------------------------------------------
    def note(self, loss: Any) -> None:
        """A backward pass on ``loss`` (a one-element tensor)."""
        self.batch_counted = False
        if self.off:
            return
        try:
            value = getattr(loss, UNSCALED, None)
            self.noted.append(loss.detach() if value is None else value)
            if len(self.noted) > MAX_NOTED:
                self.noted = [_sum(self.noted)]
        except Exception as exc:  # noqa: BLE001 - never in the way of the script's training
            self._give_up(exc)

    def forwarded(self, args: tuple, kwargs: dict) -> None:
        """A training forward of a DDP model: its batch's samples, unless this backward pass's batch is counted."""
        if self.batch_counted:
            return
        self.batch_counted = True
        try:
            self.samples += _batch_size(args, kwargs)
        except Exception as exc:  # noqa: BLE001 - never in the way of the script's training
            self._give_up(exc)

    def optimizer_stepped(self, optimizer: Any) -> None:
        self.stepped += 1
        noted, self.noted = self.noted, []
        if self.off:
            return
        try:
            self._close_step(optimizer, noted)
        except Exception as exc:  # noqa: BLE001 - never in the way of the script's training
            self._give_up(exc)

    def _close_step(self, optimizer: Any, noted: list[Any]) -> None:
        primary = self.primary() if self.primary is not None else None
        if primary is None:
            self.primary, primary = weakref.ref(optimizer), optimizer
        if optimizer is not primary or not noted:
            return  # another optimizer's step, or a step without a backward pass seen
        self.step += 1
        self.window += noted
        self.window_steps += 1
        if self.step <= EVERY_STEP or self.step % self.stride == 0:
            self._report()
        self.emit_ready()

    def step_skipped(self) -> None:
        """A GradScaler did not step its optimizer: what this step's backward noted belongs to no step."""
        self.noted = []

    # -- reports -------------------------------------------------------------
    def _report(self) -> None:
        now = self.clock()
        elapsed = now - self.since if self.since is not None else None  # the first: the script's set-up too
        samples = self.samples
        rate = samples * self.world_size / elapsed if samples and elapsed else None
        self.since, self.samples = now, 0
        window, steps = self.window, self.window_steps
        self.window, self.window_steps = [], 0
        if elapsed is not None:
            self.stride = _stride(elapsed / steps)
        report = _pending(window, steps, self.step, samples, rate)
        report.at = output_at()
        self.queue.append(report)

    def emit_ready(self, wait: bool = False) -> None:
        """Emit the reports whose values have arrived (all of them with ``wait``), unless the script reports
        its steps itself; while it has imported the reporter but not reported a step yet, they wait."""
        if not self.queue:
            return  # most steps after the first ones: nothing to emit
        reporter = _reporter()
        if reporter == REPORTS:
            self.off = True
            self.queue.clear()
            return
        if reporter == MAY_REPORT and not wait and len(self.queue) < MAX_QUEUED:
            return
        while self.queue and self.queue[0].ready(wait):
            report = self.queue.popleft()
            loss = float(report.value.item() if hasattr(report.value, "item") else report.value)
            rate = {"samples_per_s": report.rate} if report.rate is not None else {}
            self.emitter.emit(protocol.STEP, step=report.step, loss=loss if math.isfinite(loss) else None,
                              source=protocol.OBSERVED, steps=report.steps, samples=report.samples, **rate,
                              **report.at)

    def flush(self) -> None:
        """The end (the process group goes, or the process exits): the last steps' report, and every report."""
        if self.off:
            return
        try:
            if self.window_steps:
                self._report()
            self.emit_ready(wait=True)
        except Exception as exc:  # noqa: BLE001 - at exit: never in the way of the script's own ending
            self._give_up(exc)

    def _give_up(self, exc: BaseException) -> None:
        self.off = True
        self.queue.clear()
        print(f"ddpstudio rank helper: no loss curve from this rank's backward passes: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)


def output_at() -> dict[str, int]:
    """The size of the rank's stdout and stderr files now (``out_at``, ``err_at``), those that are files: a line
    the launcher reads at a larger offset was printed after this step closed, so an evaluation it reports
    belongs to this step, however late the launcher reads it (core/launch/scriptsteps.py ``step_at``)."""
    at = {}
    for fd, name in ((1, "out_at"), (2, "err_at")):
        try:
            found = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(found.st_mode):
            at[name] = found.st_size
    return at


def _stride(step_s: float) -> int:
    """Every how many steps to report: a power of two, so about ``REPORTS_PER_S`` reports a second at most."""
    if step_s <= 0:
        return MAX_STRIDE
    wanted = 1.0 / (REPORTS_PER_S * step_s)
    return 1 if wanted <= 1 else min(MAX_STRIDE, 1 << math.ceil(math.log2(wanted)))


def _batch_size(args: tuple, kwargs: dict) -> int:
    """The first dimension of the first tensor among a forward's arguments (in a list, tuple or dict too)."""
    for value in (*args, *kwargs.values()):
        inside = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
        for item in (value, *inside):
            shape = getattr(item, "shape", None)
            if shape is not None and getattr(item, "dim", None) is not None and len(shape) >= 1:
                return int(shape[0])
    return 0


def _sum(values: list[Any]) -> Any:
    """The sum of one-element tensors, as one tensor; on the host one by one when they do not stack."""
    import torch

    try:
        return torch.stack([v.reshape(()) for v in values]).float().sum()
    except (RuntimeError, TypeError):
        return torch.tensor(sum(float(v.item()) for v in values))


def _pending(window: list[Any], steps: int, step: int, samples: int, rate: float | None) -> _Report:
    """The mean loss per step over ``window``: on the host now, or on its way from the GPU without waiting."""
    total = _sum(window) if len(window) > 1 else window[0].reshape(()).float()
    mean = total / steps if steps > 1 else total
    if mean.device.type == "cuda":
        import torch

        host = mean.to("cpu", non_blocking=True)  # on the device's current stream, into pinned memory
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(mean.device))
        return _Report(step, steps, host, samples, rate, done)
    return _Report(step, steps, mean.item(), samples, rate)


def _reporter() -> str:
    """Does the script report its steps itself (``ddpstudio.report.step``)? ``MAY_REPORT``: it imported the
    reporter but has not reported a step yet."""
    report = sys.modules.get("ddpstudio.report")
    if report is None:
        return ""
    return REPORTS if getattr(report, "steps_reported", False) else MAY_REPORT
