"""What ``ddpstudio run`` prints: a live progress bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from ddpstudio.cli.vt import enable_virtual_terminal
from ddpstudio.core import protocol
from ddpstudio.core.platform import Platform, current


def format_eta(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "--:--"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def eval_line(ev: protocol.Event) -> str:
    """One line for an ``eval`` event, shared by the CLI and the window's log."""
    parts = [f"eval after step {ev.get('step')}"]
    if isinstance(ev.get("loss"), (int, float)):
        parts.append(f"loss {ev.get('loss'):.4f}")
    if isinstance(ev.get("top1"), (int, float)):
        parts.append(f"top-1 {100 * ev.get('top1'):.1f}%")
    if isinstance(ev.get("top5"), (int, float)):
        parts.append(f"top-5 {100 * ev.get('top5'):.1f}%")
    if ev.get("samples"):
        parts.append(f"on {ev.get('samples')} samples")
    return ", ".join(parts)


class ProgressView:
    """Consumes protocol events; dispatches by type to ``_handle_<type>``."""

    def __init__(
        self, out: TextIO | None = None, tty: bool | None = None, every: int = 5, platform: Platform | None = None,
        kernel32: Any | None = None,
    ) -> None:
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        if self.tty and not enable_virtual_terminal(platform or current(), kernel32):
            self.tty = False  # a console that would print ESC[K literally: plain lines instead
        self.every = every
        self.total: int | None = None
        self.first_step_t: float | None = None
        self.first_step = 0
        self.last_line = ""
        self.scraped: dict[int, tuple[int, float]] = {}
        self.model_path: str | None = None

    def feed(self, event: protocol.Event) -> None:
        handler = getattr(self, f"_handle_{event.type}", None)
        if handler is not None:
            handler(event)

    def _print(self, text: str) -> None:
        if self.tty and self.last_line:
            self.out.write("\r\033[K")
        self.out.write(text + "\n")
        self.last_line = ""
        self.out.flush()

    def _status(self, text: str) -> None:
        if self.tty:
            self.out.write("\r\033[K" + text)
            self.last_line = text
            self.out.flush()

    def _handle_run_started(self, ev: protocol.Event) -> None:
        self._print(f"run {ev.get('run_id')}: {ev.get('world_size')} ranks, {ev.get('backend')} on "
                    f"{ev.get('device')}, {ev.get('store')} store")
        for reason in ev.get("reasons") or []:
            self._print(f"  - {reason}")
        self._print(f"  run folder: {ev.get('run_dir')}")
        self.total = ev.get("max_steps")

    def _handle_global_step(self, ev: protocol.Event) -> None:
        step, now = int(ev.get("step", 0)), time.monotonic()
        self.total = ev.get("total_steps") or self.total
        if self.first_step_t is None:
            self.first_step_t, self.first_step = now, step
        eta = None
        if self.total and step > self.first_step:
            eta = (now - self.first_step_t) / (step - self.first_step) * (self.total - step)
        self._show(step, ev.get("loss"), ev.get("samples_per_s"), eta)

    def _handle_step(self, ev: protocol.Event) -> None:
        # Scripts without the reporter only give per-rank (scraped) losses; show rank 0's.
        if ev.get("source") == "scraped" and ev.rank == 0:
            self._show(int(ev.get("step", 0)), ev.get("loss"), None, None)

    def _show(self, step: int, loss, rate, eta) -> None:
        total = self.total
        loss_s = f"{loss:.4f}" if isinstance(loss, (int, float)) else "n/a"
        rate_s = f"{rate:7.1f} samples/s" if isinstance(rate, (int, float)) else ""
        if self.tty:
            bar = ""
            if total:
                done = int(20 * min(step, total) / total)
                bar = "[" + "#" * done + "-" * (20 - done) + "] "
            of = f"/{total}" if total else ""
            self._status(f"{bar}step {step}{of}  loss {loss_s}  {rate_s}  ETA {format_eta(eta)}")
        elif step == 1 or step % self.every == 0 or (total and step == total):
            self._print(f"step {step:5d}  loss {loss_s}  {rate_s}".rstrip())

    def _handle_epoch_end(self, ev: protocol.Event) -> None:
        loss = ev.get("loss")
        rate = ev.get("samples_per_s")
        wait = ev.get("data_wait_fraction")
        parts = [f"epoch {ev.get('epoch')} done"]
        if isinstance(loss, (int, float)):
            parts.append(f"mean loss {loss:.4f}")
        if isinstance(rate, (int, float)):
            parts.append(f"{rate:.1f} samples/s")
        if isinstance(wait, (int, float)):
            parts.append(f"{100 * wait:.0f}% of time waiting for data")
        self._print(", ".join(parts))

    def _handle_eval(self, ev: protocol.Event) -> None:
        self._print(eval_line(ev))

    def _handle_model_saved(self, ev: protocol.Event) -> None:
        self.model_path = ev.get("path")
        self._print(f"model weights saved: {self.model_path}")

    def _handle_checkpoint_saved(self, ev: protocol.Event) -> None:
        self._print(f"checkpoint saved at step {ev.get('step')}: {ev.get('path')}")

    def _handle_log(self, ev: protocol.Event) -> None:
        # The recipe's own lines (such as where a resumed run starts); ranks' stdout stays in the logs.
        if ev.get("stream") == "recipe":
            self._print(str(ev.get("line")))

    def _handle_warning(self, ev: protocol.Event) -> None:
        self._print(f"warning: {ev.get('message')}")

    def _handle_run_finished(self, ev: protocol.Event) -> None:
        state = ev.get("state")
        duration = ev.get("duration_s") or 0.0
        self._print(f"run {protocol.outcome_text(state)} after {duration:.1f} s")
        if state in (protocol.NOTHING_TRAINED, protocol.NOT_DISTRIBUTED):
            self._not_trained(ev)
        if self.model_path:
            self._print(f"trained weights: {self.model_path} (loading them: README, 'Using the trained model')")
        cause = ev.get("root_cause")
        if state == protocol.FAILED and cause:
            self._print(f"root cause: {ev.get('summary')}")
            for line in cause.get("traceback_tail") or []:
                self._print(f"    {line}")
            self._print(f"logs: {ev.get('run_dir')}")

    def _not_trained(self, ev: protocol.Event) -> None:
        """Why a run that exited 0 did not train (one line), then what its ranks said last."""
        from ddpstudio.core.launch.outcome import last_output_lines

        self._print(str(ev.get("summary")))
        lines = last_output_lines(ev.get("last_output"))
        if lines:
            self._print("the ranks' last output:")
            for line in lines:
                self._print(f"  {line}")
        self._print(f"logs: {ev.get('run_dir')}")
