"""The window with a user script that reports its steps (``ddpstudio.report``): progress, samples/s and the
global mean come from ``report.step``, as they do from the built-in recipe; and the one-GPU-per-rank switch."""

from __future__ import annotations

import pytest

from ddpstudio.gui.command_line import run_arguments
from ddpstudio.gui.form_state import SetupState
from tests.studio import SCRIPTS
from tests.test_gui_window import RUN_TIMEOUT_MS, assert_nothing_left, launch, open_window  # noqa: F401 (a fixture)

pytestmark = pytest.mark.gui
REPORTING = SetupState(workload="script-args", script_path=str(SCRIPTS / "chatty_ranks.py"),
                       script_args="--report --steps 4")


@pytest.mark.slow
def test_report_step_drives_the_windows_progress_and_global_mean(qtbot, open_window, studio_home):  # noqa: F811
    window = open_window(REPORTING)
    form = window.form
    assert form.editors["one_gpu_per_rank"].isVisibleTo(form) and not form.state().one_gpu_per_rank
    launch(qtbot, window)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        pass
    assert finished.args[0].get("state") == "finished"
    m = window.metrics
    assert (m.step, m.total_steps) == (4, 4)  # total_steps came with report.step
    assert list(m.global_loss.data()[0]) == [1, 2, 3, 4]
    assert m.global_loss.last[1] == pytest.approx((0.1436 + 3.2156) / 2, abs=1e-3)  # the mean of both ranks
    assert set(m.samples_per_s.data()[1]) == {15.0}  # the mean of what the ranks reported (10, 20)
    qtbot.waitUntil(lambda: window.progress.bar.format() == "step 4 / 4  (100%)", timeout=10_000)
    assert "15 samples/s" in window.progress.numbers.text()
    assert_nothing_left(qtbot, studio_home)

    form.editors["one_gpu_per_rank"].setChecked(True)
    assert form.state().to_request().script.one_gpu_per_rank
    assert "--one-gpu-per-rank" in run_arguments(form.state())
    assert SetupState.from_dict(form.state().to_dict()).one_gpu_per_rank
