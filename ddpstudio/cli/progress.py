"""What ``ddpstudio run`` prints: a live progress bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import collections
import math
import sys
import time
from typing import Any, TextIO

from ddpstudio.cli.vt import enable_virtual_terminal
from ddpstudio.core import protocol
from ddpstudio.core.launch.rootcause import without_rank_prefix
from ddpstudio.core.platform import Platform, current
from ddpstudio.core.words import counted


SHOW_OUTPUT = ("0", "all", "none")  # ddpstudio run --show-output
SCRIPT_STREAMS = ("stdout", "stderr")
TAIL_SHOWN = 60  # lines of each rank's stderr remembered: more than a root cause's traceback tail (15)


def format_eta(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "--:--"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def loss_text(loss: float) -> str:
    """A loss as the console shows it: four decimals, or four significant digits below 0.01 (a converged
    Trainer's 5.836e-05 is not "0.0001")."""
    return f"{loss:.4f}" if loss == 0 or abs(loss) >= 0.01 or loss != loss else f"{loss:.4g}"


def eval_line(ev: protocol.Event) -> str:
    """One line for an ``eval`` event, shared by the CLI and the window's log."""
    parts = [f"eval after step {ev.get('step')}"]
    if isinstance(ev.get("loss"), (int, float)):
        parts.append(f"loss {loss_text(ev.get('loss'))}")
    if isinstance(ev.get("top1"), (int, float)):
        parts.append(f"top-1 {100 * ev.get('top1'):.1f}%")
    if isinstance(ev.get("top5"), (int, float)):
        parts.append(f"top-5 {100 * ev.get('top5'):.1f}%")
    if ev.get("samples"):
        parts.append(f"on {ev.get('samples')} samples")
    return ", ".join(parts)


_NOT_SHOWN = object()  # no output printed above holds the traceback (None is the script's own process)


class ProgressView:
    """Consumes protocol events; dispatches by type to ``_handle_<type>``."""

    def __init__(
        self, out: TextIO | None = None, tty: bool | None = None, every: int = 5, platform: Platform | None = None,
        kernel32: Any | None = None, show_output: str = "0",
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
        self.model_path: str | None = None
        self.show_output = show_output  # a script's own stdout/stderr: "0" (rank 0), "all" or "none"
        self.kind: str | None = None  # run_started's kind: only scripts have output of their own to show
        self.world_size: int | None = None  # as the ranks report it (rank_joined), once known
        self.joined: set[int] = set()
        # The script's output lines printed here lately, per rank: a root cause's traceback tail that is
        # among them was on the screen already and is not printed twice (issue 27).
        self.shown: dict[int | None, collections.deque[str]] = {}
        self.warned: set[str] = set()  # warnings printed: the rank helper's line saying the same is not
        self.errors: list[str] = []  # the ranks' error events' messages: words a hint may be found by
        self.unshown_step: str | None = None  # the last step's line, not printed (every 5th is): the run's end shows it
        self._batched = False  # inside feed_all: one flush at its end
        self._handlers: dict[str, Any] = {}  # event type -> its _handle_ method (None: ignored)

    def feed(self, event: protocol.Event) -> None:
        # One lookup per event type, not a name built and looked up per event: the CLI reads two events per
        # line a script prints (issue 20).
        try:
            handler = self._handlers[event.type]
        except KeyError:
            handler = self._handlers[event.type] = getattr(self, f"_handle_{event.type}", None)
        if handler is not None:
            handler(event)

    def feed_all(self, events: list[protocol.Event]) -> None:
        """Several events, the text flushed once at the end (what one read of the stream brought)."""
        self._batched = True
        try:
            for event in events:
                self.feed(event)
        finally:
            self._batched = False
            self.out.flush()

    @property
    def unread(self) -> frozenset[str]:
        """Event types this view has no handler for: a stream reader may leave them unparsed (such as a
        rank's own ``step``, one per line a script prints; the view shows the global steps)."""
        return frozenset(t for t in protocol.KNOWN_TYPES if not hasattr(self, f"_handle_{t}"))

    def _flush(self) -> None:
        if not self._batched:
            self.out.flush()

    def _print(self, text: str) -> None:
        if self.tty and self.last_line:
            self.out.write("\r\033[K")
        self.out.write(text + "\n")
        self.last_line = ""
        self._flush()

    def _status(self, text: str) -> None:
        if self.tty:
            self.out.write("\r\033[K" + text)
            self.last_line = text
            self._flush()

    def _handle_run_started(self, ev: protocol.Event) -> None:
        ranks = counted(ev.get("world_size"), "rank") if ev.get("world_size") else "ranks started by the script"
        self._print(f"run {ev.get('run_id')}: {ranks}, {ev.get('backend')} on "
                    f"{ev.get('device')}, {ev.get('store')} store")
        for reason in ev.get("reasons") or []:
            self._print(f"  - {reason}")
        self._print(f"  run folder: {ev.get('run_dir')}")
        self.total = ev.get("max_steps")
        self.kind = ev.get("kind")

    def _handle_rank_joined(self, ev: protocol.Event) -> None:
        """All ranks joined: said once, with the world size their process groups report."""
        size = ev.get("world_size")
        if ev.rank is None or not isinstance(size, int) or ev.rank in self.joined:
            return
        self.joined.add(ev.rank)
        if len(self.joined) == size and self.world_size is None:
            self.world_size = size
            self._print(f"all {size} ranks joined (world size {size}, as the ranks report it)")

    def _handle_global_step(self, ev: protocol.Event) -> None:
        step, now = int(ev.get("step", 0)), time.monotonic()
        self.total = ev.get("total_steps") or self.total
        if self.first_step_t is None:
            self.first_step_t, self.first_step = now, step
        eta = None
        if self.total and step > self.first_step:
            eta = (now - self.first_step_t) / (step - self.first_step) * (self.total - step)
        self._show(step, ev.get("loss"), ev.get("samples_per_s"), eta)

    def _show(self, step: int, loss, rate, eta) -> None:
        total = self.total
        loss_s = loss_text(loss) if isinstance(loss, (int, float)) else "n/a"
        rate_s = f"{rate:7.1f} samples/s" if isinstance(rate, (int, float)) else ""
        if self.tty:
            bar = ""
            if total:
                done = int(20 * min(step, total) / total)
                bar = "[" + "#" * done + "-" * (20 - done) + "] "
            of = f"/{total}" if total else ""
            self._status(f"{bar}step {step}{of}  loss {loss_s}  {rate_s}  ETA {format_eta(eta)}")
        else:
            line = f"step {step:5d}  loss {loss_s}  {rate_s}".rstrip()
            shown = step == 1 or step % self.every == 0 or (total and step == total)
            if shown:
                self._print(line)
            self.unshown_step = None if shown else line  # printed at the end if it is the last

    def _handle_epoch_end(self, ev: protocol.Event) -> None:
        loss = ev.get("loss")
        rate = ev.get("samples_per_s")
        wait = ev.get("data_wait_fraction")
        parts = [f"epoch {ev.get('epoch')} done"]
        if isinstance(loss, (int, float)):
            parts.append(f"mean loss {loss_text(loss)}")
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
        # The recipe's own lines (such as where a resumed run starts), who joined or stopped (nodes: ddpstudio
        # host/join), and a script's own output: rank 0's as it printed it, or every rank's with its number
        # in front (--show-output).
        stream, line = ev.get("stream"), str(ev.get("line"))
        if stream in ("recipe", "nodes"):
            self._print(line)
        elif stream in SCRIPT_STREAMS and self.kind == "script":
            if line.startswith(protocol.HELPER_SAYS) and line[len(protocol.HELPER_SAYS):] in self.warned:
                return  # the rank helper's own line for a warning printed just before (it is in the rank's log)
            if self.show_output == "all":
                self._print(f"[rank {ev.rank}] {line}" if ev.rank is not None else f"[script] {line}")
            elif self.show_output == "0" and ev.rank in (0, None):  # None: a spawn-style script's own process
                self._print(line)
            else:
                return
            if stream == "stderr" and line.strip():
                shown = self.shown.setdefault(ev.rank, collections.deque(maxlen=TAIL_SHOWN))
                shown.append(without_rank_prefix(line).rstrip())

    def _handle_error(self, ev: protocol.Event) -> None:
        self.errors.append(str(ev.get("message") or ""))

    def _handle_warning(self, ev: protocol.Event) -> None:
        self.warned.add(str(ev.get("message")))
        self._print(f"warning: {ev.get('message')}")

    def _handle_run_restarted(self, ev: protocol.Event) -> None:
        from ddpstudio.core.launch.restart import restart_words

        self._print(restart_words(ev))
        self.first_step_t = None  # the ETA is measured again from the resumed steps

    def _handle_batch_balanced(self, ev: protocol.Event) -> None:
        self._print(str(ev.get("reason", "")))  # each rank's batch and why (rank/balance.py)

    def _handle_rank_stuck(self, ev: protocol.Event) -> None:
        from ddpstudio.core.launch.hangwatch import stuck_words

        self._print(stuck_words(ev, "press Ctrl+C"))

    def _handle_run_finished(self, ev: protocol.Event) -> None:
        if ev.get("refused"):  # nothing started; the launcher's "ddpstudio: error:" line said why, once
            return
        if self.unshown_step is not None:  # a script's steps have no total: its last one is shown here
            self._print(self.unshown_step)
            self.unshown_step = None
        state = ev.get("state")
        duration = ev.get("duration_s") or 0.0
        world = ev.get("world_size") or self.world_size
        restarts = ev.get("restarts")
        self._print(f"run {protocol.outcome_text(state)} after {duration:.1f} s"
                    + (f" (world size {world})" if world else "")
                    + (f", {restarts} restart(s) after a crash" if restarts else ""))
        if state in (protocol.NOTHING_TRAINED, protocol.NOT_DISTRIBUTED):
            self._not_trained(ev)
        if self.model_path:
            self._print(f"trained weights: {self.model_path} (loading them: README, 'Using the trained model')")
        cause = ev.get("root_cause")
        if state == protocol.FAILED and cause:
            self._print(f"root cause: {ev.get('summary')}")
            above = self._shown_rank(cause)
            if above is not _NOT_SHOWN:
                same = "" if above == cause.get("rank") else "the same "
                whose = "the script's own process" if above is None else f"rank {above}"
                self._print(f"    ({same}traceback is printed above, from {whose})")
            else:
                for line in cause.get("traceback_tail") or []:
                    self._print(f"    {line}")
            self._hints(ev, cause)
            self._logs(ev)

    def _hints(self, ev: protocol.Event, cause: dict) -> None:
        """What to do about the root cause, as the window's error panel says it, in the CLI's words."""
        from ddpstudio.core.hints import CLI, hints_for, script_python

        found = hints_for(str(ev.get("summary") or ""), str(cause.get("message") or ""),
                          *(cause.get("traceback_tail") or []), *self.errors,
                          python=script_python(ev.get("run_dir")), front=CLI)
        for hint in found:  # a command on a line of its own (the missing module's install line) is indented
            self._print(f"what to do: {hint.title}. " + hint.text.replace("\n", "\n    "))

    def _not_trained(self, ev: protocol.Event) -> None:
        """Why a run that exited 0 did not train (one line), then what its ranks said last."""
        from ddpstudio.core.launch.outcome import last_output_lines

        self._print(str(ev.get("summary")))
        lines = last_output_lines(ev.get("last_output"))
        if lines:
            self._print("the ranks' last output:")
            for line in lines:
                self._print(f"  {line}")
        self._logs(ev)

    def _shown_rank(self, cause: dict) -> object:
        """The rank whose output printed above holds every line of ``cause``'s traceback tail (the failing
        rank's own first; None: a spawn-style script's own process), or ``_NOT_SHOWN``: a script's traceback is
        on the screen once, not twice."""
        tail = [line.rstrip() for line in cause.get("traceback_tail") or [] if line.strip()]
        starts = [i for i, line in enumerate(tail) if line.startswith("Traceback (most recent call last)")]
        tail = tail[starts[-1]:] if starts else tail  # a rank's own log lines before its traceback name the rank
        ranks = sorted(self.shown, key=lambda r: (r != cause.get("rank"), r if isinstance(r, int) else -1))
        return next((r for r in ranks if tail and set(tail) <= set(self.shown[r])), _NOT_SHOWN)

    def _logs(self, ev: protocol.Event) -> None:
        """Where the run's logs are; a run refused before it had a folder (a host that never started) has none."""
        if ev.get("run_dir"):
            self._print(f"logs: {ev.get('run_dir')}")
