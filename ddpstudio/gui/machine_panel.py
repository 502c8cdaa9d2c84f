"""The machine panel: one card per GPU (or the CPU card), and the backend/store chosen, with why.

Cards are filled from the inventory once and updated from each sampler
snapshot; a value the driver does not report reads "n/a", never 0. Each GPU
card's check box says whether that GPU trains (the form's ``gpus``; all
ticked means every GPU, the default).
"""

from __future__ import annotations

import os
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QFrame, QGroupBox, QHBoxLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from ddpstudio.core.exchange import probe
from ddpstudio.core.exchange.probekey import key_for
from ddpstudio.core.gpu import GpuInfo, GpuSample, Inventory, Snapshot
from ddpstudio.core.plan import Plan

CPU_MODE_TEXT = "No NVIDIA GPU found: training runs on the CPU with Gloo"
COMPACT_FROM = 4  # GPUs: from this many, each card is one row, so the setup form stays in view
NOT_PROBED_TEXT = ("Not checked yet whether Gloo can all-reduce GPU tensors here; until then GPU gradients go "
                   "through the CPU. 'ddpstudio doctor' checks it.")


def _label(text: str = "", bold: bool = False, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(wrap)
    label.setTextFormat(Qt.TextFormat.PlainText)
    if bold:
        font = label.font()
        font.setBold(True)
        label.setFont(font)
    return label


def _bar(name: str) -> QProgressBar:
    bar = QProgressBar()
    bar.setRange(0, 100)
    bar.setAccessibleName(name)
    bar.setTextVisible(True)
    return bar


class GpuCard(QFrame):
    """A GPU's card; ``compact``: one row (name, load, memory), the details in its tooltip."""

    def __init__(self, gpu: GpuInfo, inventory: Inventory, parent: QWidget | None = None,
                 compact: bool = False) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.gpu = gpu
        self.title = _label(f"GPU {gpu.index}: {gpu.name}", bold=True)
        driver = inventory.driver_version or "n/a"
        cc = f" · compute {gpu.compute_capability}" if gpu.compute_capability else ""
        self.detail = _label(f"{gpu.total_memory_mb / 1024:.1f} GiB{cc} · driver {driver}")
        self.util = _bar(f"GPU {gpu.index} utilisation")
        self.memory = _bar(f"GPU {gpu.index} memory")
        self.sensors = _label("")
        self.train = QCheckBox()
        self.train.setChecked(True)
        self.train.setAccessibleName(f"Train on GPU {gpu.index}")
        self.train.setToolTip(f"Train on GPU {gpu.index}: untick a GPU that drives the display, is slower or is "
                              "busy; the run then sees only the ticked ones, one rank each (--gpus)")
        self.compact = compact
        if compact:
            self.title.setText(f"GPU {gpu.index}")
            self.title.setWordWrap(False)
            self.setToolTip(f"GPU {gpu.index}: {gpu.name}\n{self.detail.text()}")
            self.detail.hide()
            self.sensors.hide()
        layout = QHBoxLayout(self) if compact else QVBoxLayout(self)
        if compact:
            layout.setContentsMargins(6, 2, 6, 2)
            layout.addWidget(self.train)
            layout.addWidget(self.title)
        else:
            head = QHBoxLayout()
            head.addWidget(self.train)
            head.addWidget(self.title, 1)
            layout.addLayout(head)
        for widget in (self.detail, self.util, self.memory, self.sensors):
            layout.addWidget(widget)
        self.update_sample(None)

    @property
    def gpu_id(self) -> str:
        """How a choice names this GPU: its UUID (core/gpu/selection.py), its number where torch gives none."""
        return self.gpu.uuid or str(self.gpu.index)

    def update_sample(self, sample: GpuSample | None) -> None:
        util = sample.utilization_pct if sample else None
        self.util.setValue(int(util or 0))
        self.util.setFormat(f"load {util:.0f}%" if util is not None else "load n/a")
        used = sample.memory_used_mb if sample else None
        total = (sample.memory_total_mb if sample else None) or self.gpu.total_memory_mb
        self.memory.setValue(int(100 * used / total) if used is not None and total else 0)
        what = "mem" if self.compact else "memory"
        self.memory.setFormat(f"{what} {used / 1024:.1f} / {total / 1024:.1f} GiB" if used is not None
                              else f"{what} n/a")
        parts = []
        if sample and sample.temperature_c is not None:
            parts.append(f"{sample.temperature_c:.0f} °C")
        if sample and sample.power_w is not None:
            parts.append(f"{sample.power_w:.0f} W")
        self.sensors.setText(" · ".join(parts))
        self.sensors.setVisible(bool(parts) and not self.compact)


class CpuCard(QFrame):
    def __init__(self, inventory: Inventory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = _label(CPU_MODE_TEXT, bold=True)
        why = [inventory.nvml_state] if inventory.nvml_state != "ok" else []
        why += list(inventory.notes)
        self.detail = _label(f"{os.cpu_count() or '?'} logical CPUs · torch {inventory.torch_version}"
                             + "".join(f"\n{w}" for w in why))
        self.ranks = _label("")
        self.ranks.setAccessibleName("CPU load per rank")
        layout = QVBoxLayout(self)
        for widget in (self.title, self.detail, self.ranks):
            layout.addWidget(widget)
        self.update_ranks({})

    def update_ranks(self, load: dict[int, float]) -> None:
        self.ranks.setText("  ".join(f"rank {r}: {pct:.0f}%" for r, pct in sorted(load.items())))
        self.ranks.setVisible(bool(load))


class MachinePanel(QGroupBox):
    gpus_chosen = Signal(object)  # list[str]: the ticked GPUs' ids, [] when every GPU is ticked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Machine", parent)
        self._choice_enabled = True
        self.inventory: Inventory | None = None
        self.cards: list[QFrame] = []
        self.status = _label("Looking at this machine…")
        self.decisions = _label("")
        self.decisions.setAccessibleName("Chosen backend and store")
        self.exchange = _label("")
        self.exchange.setAccessibleName("Gradient exchange")
        self.exchange.hide()
        self.probe_result: probe.ProbeResult | None = None
        self._cards_box = QVBoxLayout()
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addLayout(self._cards_box)
        layout.addWidget(self.exchange)
        layout.addWidget(self.decisions)

    @property
    def cpu_mode(self) -> bool | None:
        return None if self.inventory is None else self.inventory.cpu_mode

    def set_inventory(self, inventory: Inventory) -> None:
        self.inventory = inventory
        for card in self.cards:
            card.deleteLater()
        if inventory.cpu_mode:
            self.cards = [CpuCard(inventory)]
        else:
            compact = len(inventory.gpus) >= COMPACT_FROM
            self.cards = [GpuCard(gpu, inventory, compact=compact) for gpu in inventory.gpus]
            # Compact rows sit close together (the style's gap is for tall cards): eight GPUs plus the
            # decisions must leave the form in view on a 1280x720 screen.
            self._cards_box.setSpacing(1 if compact else -1)
        for card in self.cards:
            self._cards_box.addWidget(card)
            if isinstance(card, GpuCard):
                card.train.toggled.connect(self._on_ticked)
        self._lock_last()
        self.status.hide()
        # A small JSON file read, keyed by this inventory: instant, no torch, no NVML call.
        self.set_probe_result(probe.cached_result(key_for(inventory)))

    # -- which GPUs train ---------------------------------------------------------
    def _gpu_cards(self) -> list[GpuCard]:
        return [card for card in self.cards if isinstance(card, GpuCard)]

    def chosen(self) -> list[str]:
        """The ticked GPUs' ids; [] when all are ticked (no choice: every GPU, wherever the setup is used)."""
        cards = self._gpu_cards()
        ticked = [card.gpu_id for card in cards if card.train.isChecked()]
        return [] if len(ticked) == len(cards) else ticked

    def show_chosen(self, ids: list[str]) -> None:
        """Tick what a setup chose ([]: every GPU); ids of GPUs not here tick nothing (the form says why)."""
        for card in self._gpu_cards():
            was = card.train.blockSignals(True)
            card.train.setChecked(not ids or any(i in (card.gpu.uuid, str(card.gpu.index)) for i in ids))
            card.train.blockSignals(was)
        self._lock_last()

    def set_choice_enabled(self, enabled: bool) -> None:
        """No change of GPUs while a run or benchmark uses them."""
        self._choice_enabled = enabled
        self._lock_last()

    def _lock_last(self) -> None:
        """The last ticked GPU cannot be unticked: a run trains on at least one."""
        cards = self._gpu_cards()
        ticked = [card for card in cards if card.train.isChecked()]
        for card in cards:
            card.train.setEnabled(self._choice_enabled and not (len(ticked) == 1 and card in ticked))

    def _on_ticked(self, _checked: bool) -> None:
        self._lock_last()
        self.gpus_chosen.emit(self.chosen())

    def set_probe_result(self, result: probe.ProbeResult | None) -> None:
        """One sentence on how gradients travel here (the Gloo-on-CUDA probe, pytorch #186535)."""
        self.probe_result = result
        gpu_mode = self.inventory is not None and not self.inventory.cpu_mode
        if result is None:
            self.exchange.setText(NOT_PROBED_TEXT)
            self.exchange.setToolTip("")
        else:
            self.exchange.setText(result.sentence() + ".")
            checked = time.strftime("%Y-%m-%d %H:%M", time.localtime(result.t))
            self.exchange.setToolTip(f"Gloo all-reduce of CUDA tensors: {result.outcome} ({result.detail}; "
                                     f"checked {checked})")
        self.exchange.setVisible(gpu_mode or (result is not None and result.outcome != probe.Outcome.NOT_APPLICABLE))

    def set_inventory_failed(self, message: str) -> None:
        self.status.setText(f"Could not inspect this machine: {message}")

    def update_snapshot(self, snapshot: Snapshot, rank_load: dict[int, float]) -> None:
        inventory = self.inventory
        if inventory is None:
            return
        if inventory.cpu_mode:
            self.cards[0].update_ranks(rank_load)
            return
        for sample in snapshot.gpus:
            gpu = inventory.gpu_for(sample)
            card = next((c for c in self.cards if gpu is not None and c.gpu.index == gpu.index), None)
            if card is not None:
                card.update_sample(sample)

    def set_plan(self, plan: Plan | None) -> None:
        """The decisions the current setup leads to, each with its reason. While the setup has a problem
        (often a half-typed value: "resnet" on the way to "resnet18") the last decisions stay, greyed, so
        the form below does not jump under the cursor (issue 24: it moved by about 105 px)."""
        if plan is None and self.decisions.text():
            self.decisions.setEnabled(False)
            self.decisions.setToolTip("The setup has a problem (marked in red in the form): these are the "
                                      "decisions of the last setup that was valid")
            return
        self.decisions.setEnabled(True)
        self.decisions.setToolTip("")
        self.show_reasons(plan.reasons if plan else None)

    def add_reason(self, reason: str) -> None:
        """A decision the run made once started (each rank's batch, measured for its speed: rank/balance.py)."""
        text = self.decisions.text()
        self.decisions.setText(f"{text}\n• {reason}" if text else f"• {reason}")
        self.decisions.setVisible(True)

    def show_reasons(self, reasons: list[str] | None) -> None:
        """Decisions made elsewhere (a multi-machine host's plan, from its events)."""
        self.decisions.setText("\n".join(f"• {reason}" for reason in reasons or []))
        self.decisions.setVisible(reasons is not None)
