"""The machine panel's one sentence on gradient exchange: read from the probe's cache, or injected."""

from __future__ import annotations

import time

from ddpstudio.core.exchange import probe
from ddpstudio.core.exchange.probekey import key_for
from ddpstudio.core.gpu import FakeGpuSource, detect_inventory
from ddpstudio.core.platform import LINUX
from ddpstudio.gui.machine_panel import NOT_PROBED_TEXT, MachinePanel
from tests.test_exchange_probe import ONE_GPU, RIGHT, child

TWO_GPUS = FakeGpuSource([{"name": "NVIDIA RTX A4000", "total_memory_mb": 16376, "uuid": "GPU-1"},
                          {"name": "NVIDIA RTX A4000", "total_memory_mb": 16376, "uuid": "GPU-2"}])


def panel_with(qtbot, inventory) -> MachinePanel:
    panel = MachinePanel()
    qtbot.addWidget(panel)
    started = time.monotonic()
    panel.set_inventory(inventory)
    assert time.monotonic() - started < 0.5  # on the GUI thread: must be instant
    return panel


def test_a_gpu_machine_never_probed_says_so(qtbot):
    panel = panel_with(qtbot, detect_inventory(TWO_GPUS))
    assert panel.exchange.text() == NOT_PROBED_TEXT
    assert panel.exchange.isVisibleTo(panel)


def test_a_cached_crash_reads_as_one_plain_sentence(qtbot):
    inventory = detect_inventory(TWO_GPUS)
    crashed = probe.run(child(ONE_GPU + "import ctypes; ctypes.string_at(0)\n"), key=key_for(inventory),
                        timeout_s=60, platform=LINUX)
    probe.store(crashed)
    panel = panel_with(qtbot, inventory)
    assert panel.exchange.text() == ("GPU gradients go through the CPU: Gloo crashed all-reducing CUDA tensors here "
                                     "(pytorch #186535).")
    assert "crashes (the probe process killed by SIGSEGV" in panel.exchange.toolTip()
    assert panel.probe_result == crashed


def test_an_injected_native_result_replaces_the_sentence(qtbot):
    panel = panel_with(qtbot, detect_inventory(TWO_GPUS))
    native = probe.run(child(ONE_GPU + RIGHT), timeout_s=60, platform=LINUX)
    panel.set_probe_result(native)
    assert panel.exchange.text() == "Gloo all-reduces GPU tensors correctly here: gradients stay on the GPU."
    assert panel.exchange.isVisibleTo(panel)


def test_a_result_for_another_gpu_set_is_not_shown(qtbot):
    other = detect_inventory(FakeGpuSource([{"name": "RTX", "total_memory_mb": 8000, "uuid": "GPU-9"}]))
    probe.store(probe.run(child(ONE_GPU + RIGHT), key=key_for(other), timeout_s=60, platform=LINUX))
    panel = panel_with(qtbot, detect_inventory(TWO_GPUS))
    assert panel.exchange.text() == NOT_PROBED_TEXT and panel.probe_result is None


def test_cpu_mode_without_a_result_shows_no_exchange_line(qtbot):
    panel = panel_with(qtbot, detect_inventory(FakeGpuSource([])))
    assert panel.inventory.cpu_mode
    assert not panel.exchange.isVisibleTo(panel)
