"""The run's headline: state, progress bar with ETA, current loss and throughput.

While ranks start, the state tells the phase with the time spent ("Waiting for
all ranks to join (1 of 2)… 4 s"); when the run ends, a summary card below
the bar says how it went and where its results are (``run_story``).
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from ddpstudio.cli.progress import format_eta
from ddpstudio.core import protocol
from ddpstudio.core.platform import Platform, current
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui import run_story

STATE_TEXT = {"idle": "Ready", "preparing": "Preparing…", "starting": "Starting the ranks…",
              "running": "Training", "stopping": "Stopping…", "finished": "Finished", "failed": "Failed",
              "stopped": "Stopped", "killed": "Killed", protocol.NOTHING_TRAINED: "Finished, but nothing trained",
              protocol.NOT_DISTRIBUTED: "Not a distributed script"}


def finished_text(state: str, duration) -> str:
    """The status line for a finished run: "Run finished after 15.2 s" (or "after 1:02:03")."""
    state = protocol.outcome_text(state)
    if not isinstance(duration, (int, float)):
        return f"Run {state}"
    return f"Run {state} after {duration:.1f} s" if duration < 60 else f"Run {state} after {format_eta(duration)}"


class ProgressView(QWidget):
    compare_requested = Signal(str)  # the ended run's folder: the card's "Compare with…"

    def __init__(self, parent: QWidget | None = None, platform: Platform | None = None) -> None:
        super().__init__(parent)
        self.platform = platform or current()
        self.state_name, self.launched_t = "idle", None
        self.state = QLabel(STATE_TEXT["idle"])
        font = self.state.font()
        font.setBold(True)
        self.state.setFont(font)
        self.bar = QProgressBar()
        self.bar.setAccessibleName("Run progress")
        self.bar.setRange(0, 100)  # whole percents: QProgressBar repaints at once on every new value
        self.bar.setValue(0)
        self.bar.setFormat("")
        self.numbers = QLabel()
        self.numbers.setAccessibleName("Run numbers")
        # A fixed width: a label whose text width changes re-lays out (and repaints) the window each tick.
        widest = "loss 00.0000  ·  000000 samples/s  ·  ETA 00:00:00"
        self.numbers.setFixedWidth(self.numbers.fontMetrics().horizontalAdvance(widest))
        self.numbers.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.card = QLabel()
        self.card.setAccessibleName("Run summary")
        self.card.setFrameShape(QFrame.Shape.StyledPanel)
        self.card.setWordWrap(True)
        self.card.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.card.hide()
        self.compare_button = QPushButton("Compare with…")
        self.compare_button.setToolTip("Open the Compare tab with this run and the previous run of the same model "
                                       "as the baseline; Ctrl-click other runs in the Runs tab and press Compare "
                                       "to choose others")
        self.compare_button.clicked.connect(self._compare)
        self.compare_button.hide()
        self.ended_dir = ""  # the folder of the run the card tells
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.state)
        row.addWidget(self.bar, 1)
        row.addWidget(self.numbers)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(row)
        card_row = QHBoxLayout()
        card_row.setContentsMargins(0, 0, 0, 0)
        card_row.addWidget(self.card, 1)
        card_row.addWidget(self.compare_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(card_row)
        self.metrics: RunMetrics | None = None
        self._shown: tuple | None = None

    def set_state(self, state: str) -> None:
        if state in ("preparing", "starting") and self.state_name not in ("preparing", "starting"):
            self.launched_t = time.time()
            self.card.hide()
            self.compare_button.hide()
        self.state_name = state
        self.state.setText(run_story.start_phase(self.metrics, state, self.launched_t)
                           or STATE_TEXT.get(state, state.capitalize()))

    def show_bench(self, p) -> None:
        """A scaling benchmark's progress (a ``BenchProgress``) in the header; None when it has ended."""
        if p is None:
            self._shown = None
            self.set_state("idle")
            self.refresh()
            return
        if self.metrics is not None or self.card.isVisible():  # the last run's card and bar are not about this
            self.show_metrics(None)
            self.card.hide()
            self.compare_button.hide()
            self.ended_dir = ""
        within = p.step / p.total_steps if p.total_steps and p.phase in ("warmup", "measuring") else 0.0
        done = min(1.0, (p.run_index + (1.0 if p.phase in ("done", "failed") else within)) / max(1, p.runs))
        self.state.setText(f"Benchmark: run {p.run_index + 1} of {p.runs}")
        self.bar.setValue(int(100 * done))
        ranks = f"{p.world_size} rank" + ("s" if p.world_size != 1 else "")
        self.bar.setFormat(f"{ranks} · {p.phase} · {100 * done:.0f}% of the benchmark")
        self.numbers.setText(p.variant)

    def _compare(self) -> None:
        if self.ended_dir:
            self.compare_requested.emit(self.ended_dir)

    def show_metrics(self, metrics: RunMetrics | None) -> None:
        self.metrics, self._shown = metrics, None
        self.refresh()

    def refresh(self) -> bool:
        m = self.metrics
        if m is None:
            self.bar.setValue(0)
            self.bar.setFormat("")
            self.numbers.setText("")
            return False
        eta = m.eta_s()
        phase = run_story.start_phase(m, self.state_name, self.launched_t)
        key = (m.version, None if eta is None else int(eta), phase)
        if key == self._shown:
            return False
        self._shown = key
        self.state.setText(phase or STATE_TEXT.get(self.state_name, self.state_name.capitalize()))
        if m.final is not None:
            self.card.setText(run_story.summary(m, self.platform))
        self.card.setVisible(m.final is not None)
        self.ended_dir = str((m.final or {}).get("run_dir") or "")
        self.compare_button.setVisible(bool(self.ended_dir))
        fraction = m.fraction()
        if fraction is None:
            self.bar.setValue(0)
            self.bar.setFormat(f"step {m.step}" if m.step else "")
        else:
            self.bar.setValue(int(100 * fraction))
            self.bar.setFormat(f"step {m.step} / {m.total_steps}  ({100 * fraction:.0f}%)")
        parts = []
        if m.global_loss.last is not None:
            parts.append(f"loss {m.global_loss.last[1]:.4f}")
        if m.samples_per_s.last is not None:
            parts.append(f"{m.samples_per_s.last[1]:.0f} samples/s")
        if fraction is not None and m.final is None and self.state_name in ("starting", "running"):
            parts.append(f"ETA {format_eta(eta)}")  # only while it trains: a killed past run has no ETA
        if m.restarts:  # run_restarted: the log says why
            parts.append(f"restarted {m.restarts}× after a crash")
        self.numbers.setText("  ·  ".join(parts))
        return True
