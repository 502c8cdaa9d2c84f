"""Issue 11 §1 in the window: a script that starts its own ranks gets spawn style, said why, and two rank curves."""

from __future__ import annotations

import pytest

from ddpstudio.core.plan import DEFAULT_DIST_ARGS, DEFAULT_SPAWN_ARGS
from ddpstudio.core.rendezvous.ports import find_free_port
from ddpstudio.gui.form_state import SetupState
from tests.studio import SCRIPTS
from tests.test_gui_window import RUN_TIMEOUT_MS, assert_nothing_left, curve_points, launch, open_window  # noqa: F401

pytestmark = pytest.mark.gui
TUTORIAL = str(SCRIPTS / "tutorial_spawn.py")


@pytest.mark.slow
def test_the_window_picks_spawn_style_says_why_and_plots_each_spawned_rank(qtbot, open_window, studio_home,
                                                                           monkeypatch):
    monkeypatch.setenv("TUTORIAL_PORT", str(find_free_port()))
    window = open_window(SetupState(workload="script-args"))
    form, offer = window.form, window.form.style_offer
    assert form.state().dist_args == DEFAULT_DIST_ARGS and not offer.note.isVisibleTo(form)
    form.editors["script_path"].setText(TUTORIAL)
    assert form.state().workload == "script-spawn" and form.state().dist_args == DEFAULT_SPAWN_ARGS
    assert offer.note.text() == ("Spawn style chosen: the script calls mp.spawn() (line 53): it starts its own "
                                 "ranks. Choose another kind to override.")
    assert offer.note.isVisibleTo(form) and not form.editors["world_size"].isVisibleTo(form)

    combo = form.editors["workload"]  # the user overrides: args style stays, the offer becomes a suggestion
    combo.setCurrentIndex(combo.findData("script-args"))
    combo.activated.emit(combo.currentIndex())
    form.editors["script_path"].setText(TUTORIAL)
    assert form.state().workload == "script-args" and form.state().dist_args == DEFAULT_DIST_ARGS
    assert offer.note.text().startswith("Spawn style suggested: the script calls mp.spawn()")
    combo.setCurrentIndex(combo.findData("script-spawn"))
    combo.activated.emit(combo.currentIndex())

    launch(qtbot, window)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        pass
    assert finished.args[0].get("state") == "finished" and finished.args[0].get("world_size") == 2
    qtbot.waitUntil(lambda: not window.render_timer.isActive(), timeout=10_000)
    assert all(curve_points(window.plots.loss, rank) == 5 for rank in (0, 1))
    assert window.metrics.info["world_size"] == 2 and window.metrics.joined == {0, 1}
    log = window.log_view.shown_text()
    assert "rank 0 step 5 loss" in log and "rank 1 step 5 loss" in log
    assert_nothing_left(qtbot, studio_home)


def test_the_summary_card_says_the_ranks_world_size_and_no_rank_for_the_scripts_own_failure():
    from ddpstudio.core import protocol
    from ddpstudio.core.platform import current
    from ddpstudio.gui.run_metrics import RunMetrics
    from ddpstudio.gui.run_story import summary

    m = RunMetrics()
    m.feed(protocol.make_event(protocol.RUN_STARTED, world_size=None, script_style="spawn"))
    m.feed(protocol.make_event(protocol.RANK_JOINED, rank=1, world_size=2, pid=11))
    assert m.info["world_size"] == 2  # the progress line's "1 of 2" counts against the ranks' world size
    m.feed(protocol.make_event(protocol.RUN_FINISHED, state="failed", duration_s=3.0, world_size=2,
                               root_cause={"rank": -1, "exit_code": 1}))
    assert summary(m, current()).startswith("Failed after 3.0 s · 2 ranks · exit code 1")


def test_the_window_picks_torchrun_style_for_a_torchrun_script_and_copy_as_says_an_override(qtbot, open_window):
    from ddpstudio.gui.command_line import run_arguments

    series = str(SCRIPTS / "tutorial_series_torchrun.py")
    window = open_window(SetupState(workload="script-args"))
    form, offer = window.form, window.form.style_offer
    form.editors["script_path"].setText(series)
    assert form.state().workload == "script-env" and not form.editors["dist_args"].isVisibleTo(form)
    assert offer.note.text() == ("Torchrun style chosen: the script reads LOCAL_RANK from its environment (line 24): "
                                 "it is written for torchrun, which sets it. Choose another kind to override.")
    assert run_arguments(form.state()) == ["--script", series, "--script-style", "env"]

    combo = form.editors["workload"]  # the user overrides: args style stays, said as an override in Copy as
    combo.setCurrentIndex(combo.findData("script-args"))
    combo.activated.emit(combo.currentIndex())
    form.editors["script_path"].setText(series)
    assert form.state().workload == "script-args" and form.state().dist_args == DEFAULT_DIST_ARGS
    assert offer.note.text().startswith("Torchrun style suggested: the script reads LOCAL_RANK")
    assert run_arguments(form.state()) == ["--script", series, "--script-style", "args"]

    form.editors["script_path"].setText(TUTORIAL)  # another script: spawn style, the template follows
    assert form.state().workload == "script-spawn" and form.state().dist_args == DEFAULT_SPAWN_ARGS
    form.editors["script_path"].setText(series)  # back: the user's args style for it, not our spawn
    assert form.state().workload == "script-args" and form.state().dist_args == DEFAULT_DIST_ARGS
    form.editors["script_args"].setText("3 1")  # other arguments: the override was for the old ones
    assert form.state().workload == "script-env"
    form.editors["script_path"].setText(str(SCRIPTS / "args_style.py"))  # an args script: our switch undone
    assert form.state().workload == "script-args" and form.state().dist_args == DEFAULT_DIST_ARGS
    assert not offer.note.isVisibleTo(form)
