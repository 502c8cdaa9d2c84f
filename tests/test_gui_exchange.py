"""The window's Distributed group: the gradient exchange choice, its reason with the decisions, its problems."""

from __future__ import annotations

import pytest

from ddpstudio.core.gpu import FakeGpuSource
from ddpstudio.gui.form_state import SetupState
from tests.test_gui_window import RUN_TIMEOUT_MS, open_window  # noqa: F401 (a fixture)

pytestmark = pytest.mark.gui
GPU = {"name": "NVIDIA RTX A6000", "total_memory_mb": 49140}


def checked(qtbot, window) -> None:
    qtbot.waitUntil(lambda: not window.check.pending and window.check.latest is not None, timeout=RUN_TIMEOUT_MS)


def test_choosing_staged_shows_its_reason_with_the_decisions(qtbot, open_window):  # noqa: F811
    window = open_window(SetupState(batch_size=8, image_size=32, max_steps=3))
    form = window.form
    assert form.state().grad_exchange == "auto" and form.state().grad_compression == "none"
    assert "native gradient exchange: the ranks train on the CPU" in window.machine_panel.decisions.text()
    combo = form.editors["grad_exchange"]
    combo.setCurrentIndex(combo.findData("staged"))
    form.editors["grad_compression"].setCurrentIndex(form.editors["grad_compression"].findData("fp16"))
    qtbot.waitUntil(lambda: "staged through CPU memory: chosen by you" in window.machine_panel.decisions.text(),
                    timeout=RUN_TIMEOUT_MS)
    assert "float16" in window.machine_panel.decisions.text()
    request = form.state().to_request()
    assert (request.grad_exchange, request.grad_compression, request.rank_helper) == ("staged", "fp16", True)
    assert SetupState.from_dict(form.state().to_dict()).grad_exchange == "staged"


def test_the_rank_helper_switch_shows_for_scripts_only(qtbot, open_window, tmp_path):  # noqa: F811
    window = open_window()
    form = window.form
    assert not form.editors["rank_helper"].isVisibleTo(form)
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    form.set_state(SetupState(workload="script-env", script_path=str(script), rank_helper=False))
    assert form.editors["rank_helper"].isVisibleTo(form) and not form.editors["rank_helper"].isChecked()
    assert form.state().to_request().rank_helper is False


def test_staged_with_nccl_is_marked_on_the_exchange_field(qtbot, open_window):  # noqa: F811
    window = open_window(SetupState(backend="nccl", grad_exchange="staged", batch_size=8),
                         source=FakeGpuSource(gpus=[GPU, GPU]))
    checked(qtbot, window)
    assert "choose the gloo backend" in window.form.problem_text("grad_exchange")
    assert not window.launch_button.isEnabled()
