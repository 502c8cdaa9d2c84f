"""A window that explains itself: Launch's reasons, the start and end told, the CLI's lines in the Log,
tooltips, presets, Copy as command, 1280x720. pytest-qt, waiting on signals and conditions."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from ddpstudio.cli.run import add_parser, build_request
from ddpstudio.core import protocol
from ddpstudio.core.plan import DEFAULT_SPAWN_ARGS
from ddpstudio.core.platform import LINUX, WINDOWS, current
from ddpstudio.gui.command_line import command_line, run_arguments
from ddpstudio.gui.dialogs import ScriptedDialogs
from ddpstudio.gui.field_help import FIELD_HELP
from ddpstudio.gui.form_state import SetupState
from ddpstudio.gui.path_edit import PathEdit
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui.run_narrator import RunNarrator
from ddpstudio.gui.run_story import start_phase, summary
from ddpstudio.gui.settings import Settings
from tests.studio import SCRIPTS
from tests.test_gui_window import DEMO, RUN_TIMEOUT_MS, assert_nothing_left, launch, open_window  # noqa: F401

pytestmark = pytest.mark.gui


# -- Launch says why it is disabled ----------------------------------------------------
def test_disabled_launch_names_the_field_in_its_tooltip_the_status_bar_and_on_f5(qtbot, open_window):
    window = open_window(SetupState(data="folder", data_dir=""))
    assert not window.launch_action.isEnabled()
    tip = window.launch_button.toolTip()
    assert tip.startswith("Launch is unavailable: Data folder:") and "choose one" in tip, tip
    assert window.statusBar().currentMessage().startswith("Cannot launch yet: Data folder:")
    window.statusBar().clearMessage()
    qtbot.keyClick(window, Qt.Key.Key_F5)
    assert window.statusBar().currentMessage().startswith("Cannot launch: Data folder:")
    assert window.controller.state is None and not window.preparing  # nothing started
    # Fixed: the reason goes, the tooltip says what Launch does.
    window.form.set_state(DEMO)
    qtbot.waitUntil(window.launch_action.isEnabled, timeout=RUN_TIMEOUT_MS)
    assert window.launch_button.toolTip().startswith("Start training")


@pytest.mark.slow
def test_enter_in_the_form_launches(qtbot, open_window, studio_home):
    window = open_window(replace(DEMO, world_size=1))  # about the key, not the ranks: one rank is enough
    qtbot.waitUntil(window.launch_action.isEnabled, timeout=RUN_TIMEOUT_MS)
    editor = window.form.editors["batch_size"]
    editor.setFocus()
    qtbot.waitUntil(editor.hasFocus)
    with qtbot.waitSignal(window.controller.run_started, timeout=RUN_TIMEOUT_MS):
        qtbot.keyClick(editor, Qt.Key.Key_Return)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS):
        pass
    assert_nothing_left(qtbot, studio_home)


# -- the start and the end, told ----------------------------------------------------------
def test_the_start_is_told_phase_by_phase():
    m = RunMetrics()
    assert start_phase(m, "starting", 100.0, now=103.2) == "Starting the ranks… 3 s"
    m.feed(protocol.make_event(protocol.RUN_STARTED, t=101.0, world_size=2))
    # Issue 24: until a rank reaches init_process_group it is starting Python and importing torch.
    assert start_phase(m, "running", 100.0, now=104.0) == "Starting Python and PyTorch in 2 ranks… 4 s"
    m.feed(protocol.make_event(protocol.RANK_MEETING, rank=1, t=104.2))
    assert start_phase(m, "running", 100.0, now=104.3) == "Waiting for all ranks to join (1 of 2 arrived)… 4 s"
    m.feed(protocol.make_event(protocol.RANK_JOINED, rank=0, t=104.5))
    assert start_phase(m, "running", 100.0, now=105.0) == "Waiting for all ranks to join (2 of 2 arrived)… 5 s"
    m.feed(protocol.make_event(protocol.RANK_JOINED, rank=1, t=105.5))
    assert start_phase(m, "running", 100.0, now=106.0) == "All 2 ranks joined; waiting for the first step… 6 s"
    m.feed(protocol.make_event(protocol.GLOBAL_STEP, t=106.4, step=1, loss=2.0))
    assert start_phase(m, "running", 100.0, now=107.0) == "First step after 6 s"
    assert start_phase(m, "running", 100.0, now=120.0) is None  # then plain "Training"


def test_the_end_gets_a_summary_with_results_and_where_they_are():
    m = RunMetrics()
    for step, loss in ((1, 2.0), (2, 0.5), (3, 0.7)):
        m.feed(protocol.make_event(protocol.GLOBAL_STEP, step=step, loss=loss, samples_per_s=100.0 * step))
    m.feed(protocol.make_event(protocol.EVAL, step=3, loss=0.6, top1=0.5))
    m.feed(protocol.make_event(protocol.CHECKPOINT_SAVED, path="/c/checkpoint.pt", step=3))
    m.feed(protocol.make_event(protocol.MODEL_SAVED, path="/c/model.pt", step=3))
    m.feed(protocol.make_event(protocol.RUN_FINISHED, state="finished", duration_s=75.0, run_dir="/r"))
    text = summary(m, current())
    assert text.splitlines() == [
        "Finished after 01:15 · final loss 0.7000 (best 0.5000) · top-1 50.0% (best 50.0%) · 200 samples/s",
        "weights: /c/model.pt", "checkpoint: /c/checkpoint.pt", "run folder: /r"]
    failed = RunMetrics()
    failed.feed(protocol.make_event(protocol.RUN_FINISHED, state="failed", duration_s=3.0,
                                    root_cause={"rank": 1, "exit_code": -9}))
    assert summary(failed, LINUX).startswith("Failed after 3.0 s · rank 1: killed by SIGKILL")  # POSIX naming


def test_the_log_tells_the_run_as_the_cli_does_with_times_search_and_save(qtbot, open_window, tmp_path):
    window = open_window()
    lines = []
    narrator = RunNarrator(lines.append, every=2)
    for ev in (protocol.make_event(protocol.RUN_STARTED, run_id="r1", world_size=2, backend="gloo", device="cpu",
                                   store="file", reasons=["Gloo on the CPU"], run_dir="/r"),
               *[protocol.make_event(protocol.GLOBAL_STEP, step=s, loss=1.0 / s) for s in (1, 2, 3, 4)],
               protocol.make_event(protocol.EVAL, step=4, loss=0.3, top1=0.9, top5=1.0, samples=64),
               protocol.make_event(protocol.EPOCH_END, epoch=0, loss=0.5),
               protocol.make_event(protocol.RUN_FINISHED, state="finished", duration_s=2.0)):
        narrator.feed(ev)
    assert lines == ["run r1: 2 ranks, gloo on cpu, file store", "  - Gloo on the CPU", "  run folder: /r",
                     "step     1  loss 1.0000", "step     2  loss 0.5000", "step     4  loss 0.2500",
                     "eval after step 4, loss 0.3000, top-1 90.0%, top-5 100.0%, on 64 samples",
                     "epoch 0 done, mean loss 0.5000", "run finished after 2.0 s"]
    log = window.log_view
    for line in lines:
        log.append(None, "studio", line)
    log.flush()
    shown = log.shown_text().splitlines()
    assert shown[-1].endswith("[studio] run finished after 2.0 s") and shown[-1][2] == ":"  # HH:MM:SS first
    log.search.setText("EVAL")
    assert [line.split("] ", 1)[1] for line in log.shown_text().splitlines()] == [lines[6]]
    window.dialogs.paths = [str(tmp_path / "run.log")]
    saved = log.save()
    assert saved is not None and len(saved.read_text().splitlines()) == len(log.lines)


# -- tooltips, presets, Copy as command, size ---------------------------------------------
def test_every_setup_field_has_a_tooltip_with_what_why_and_default(qtbot, open_window):
    window = open_window()
    assert set(window.form.editors) == set(FIELD_HELP)
    for name, editor in window.form.editors.items():
        tip = (editor.edit if isinstance(editor, PathEdit) else editor).toolTip()
        assert tip == FIELD_HELP[name] and ("Default: " in tip or "No default." in tip), name


def test_presets_round_trip_through_the_settings_file(qtbot, open_window, studio_home):
    dialogs = ScriptedDialogs(yes=True, texts=["tiny cpu"])
    window = open_window(SetupState(batch_size=8, max_steps=7, lr_schedule="cosine", warmup_steps=2),
                         dialogs=dialogs)
    bar = window.explainer.preset_bar
    saved = window.form.state()
    assert bar.save_current() == "tiny cpu"
    window.form.set_state(SetupState(batch_size=99))
    reread = Settings(window.settings.path)  # on disk, not only in memory
    assert reread.get("presets")["tiny cpu"]["max_steps"] == 7
    index = bar.combo.findData("tiny cpu")
    bar.combo.setCurrentIndex(index)
    with qtbot.waitSignal(bar.loaded):
        bar.combo.activated.emit(index)
    assert window.form.state() == saved
    bar.delete_current()
    assert bar.presets.names() == [] and Settings(window.settings.path).get("presets") == {}


STATES = [
    SetupState(),
    SetupState(model="resnet50", data="folder", data_dir="/d/imagenet small", image_size=64, epochs=3,
               max_steps=100, batch_size=64, batch_mode="split", lr=0.1, scale_lr=True, lr_schedule="step",
               warmup_steps=10, eval_every=25, workers=2, checkpoint_dir="/c k", resume=True, world_size=4,
               backend="gloo", store="fixed", store_path="/tmp/pg"),
    SetupState(workload="script-args", script_path="/s/main.py", script_args="--arch resnet50 'a b'",
               dist_args="--url {url} --rank {rank}", store="tcp", port=29512),
    SetupState(workload="script-env", script_path="/s/train.py"),
    # Spawn style (issue 11): no ranks, the node-level template; and args style kept for an mp.spawn script.
    SetupState(workload="script-spawn", script_path="/s/main.py", script_args="--multiprocessing-distributed",
               dist_args=DEFAULT_SPAWN_ARGS, world_size=2),
    SetupState(workload="script-args", script_path=str(SCRIPTS / "tutorial_spawn.py")),
]


@pytest.mark.parametrize("state", STATES)
def test_copy_as_command_parses_back_to_the_same_request(state):
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["run", *run_arguments(state)])
    request = state.to_request()
    if request.script is not None and request.script.cwd is not None:
        # The working folder is the line's leading cd (command_line), which the CLI keeps as its own folder.
        from ddpstudio.core import cmdline

        cd = ["cd", "/d"] if current().is_windows else ["cd"]
        assert command_line(state).startswith(f"{cmdline.shell_line([*cd, request.script.cwd], current())} && ")
    if request.script is not None:
        request.script = replace(request.script, cwd=os.getcwd())  # the CLI records the folder it ran in
    assert build_request(args) == request


def test_copy_as_command_puts_the_line_on_the_clipboard(qtbot, open_window):
    window = open_window(SetupState(max_steps=5, world_size=2))
    assert window.explainer.copy_command() == "ddpstudio run --max-steps 5 --world-size 2"
    assert QGuiApplication.clipboard().text() == "ddpstudio run --max-steps 5 --world-size 2"
    cwd = SetupState(workload="script-env", script_path=r"C:\my scripts\t.py", script_cwd=r"D:\work")
    assert command_line(cwd, WINDOWS) == (r'cd /d D:\work && ddpstudio run --script "C:\my scripts\t.py" '
                                               "--script-style env")


def test_the_window_fits_a_1280x720_screen(qtbot, open_window):
    window = open_window()
    hint = window.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 720 - 40, hint  # 40 px for a taskbar
    window.resize(1280, 680)
    qtbot.waitUntil(lambda: window.width() == 1280)
    assert window.launch_button.isVisible() and window.launch_button.geometry().bottom() < window.height()


# -- a real run, told ------------------------------------------------------------------------
@pytest.mark.slow
def test_a_real_run_is_told_from_start_to_summary(qtbot, open_window, studio_home, tmp_path):
    window = open_window(SetupState(model="mlp", batch_size=8, image_size=8, max_steps=4, eval_every=2,
                                    checkpoint_dir=str(tmp_path / "ckpt")))
    seen = set()
    launch(qtbot, window)
    qtbot.waitUntil(lambda: seen.add(window.progress.state.text()) or
                    any(s.startswith(("Waiting for all ranks", "All 2 ranks joined")) for s in seen),
                    timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        pass
    assert finished.args[0].get("state") == "finished"
    qtbot.waitUntil(window.progress.card.isVisible, timeout=10_000)
    card = window.progress.card.text()
    assert card.startswith("Finished after") and "top-1" in card, card
    assert f"weights: {tmp_path / 'ckpt' / 'model.pt'}" in card
    qtbot.waitUntil(lambda: "eval after step 4" in window.log_view.shown_text(), timeout=10_000)
    text = window.log_view.shown_text()
    assert "eval after step 2" in text and "run finished after" in text and "step     1  loss" in text
    assert set(window.plots.accuracy.curves) == {"top1", "top5"} and window.plots.accuracy.widget.isVisible()
    assert_nothing_left(qtbot, studio_home)


def test_eight_gpus_collapse_to_compact_rows_and_the_form_stays_in_view(qtbot, open_window):
    from ddpstudio.core.gpu import FakeGpuSource

    gpus = [{"name": "NVIDIA RTX A6000", "total_memory_mb": 49140, "utilization_pct": 10 * i,
             "memory_used_mb": 1024} for i in range(8)]
    window = open_window(source=FakeGpuSource(gpus=gpus))
    window.resize(1280, 720)
    qtbot.waitUntil(lambda: len(window.machine_panel.cards) == 8, timeout=30_000)
    cards = window.machine_panel.cards
    assert all(card.compact and not card.detail.isVisible() for card in cards)
    assert "RTX A6000" in cards[3].toolTip() and cards[3].title.text() == "GPU 3"
    qtbot.waitUntil(lambda: cards[7].util.format() == "load 70%", timeout=10_000)
    row = cards[0].sizeHint().height()
    assert row <= 2.5 * cards[0].title.sizeHint().height(), row  # one line of widgets, not a tall card
    assert window.machine_panel.sizeHint().height() < 0.6 * 720
    kind = window.form.editors["workload"]
    qtbot.waitUntil(lambda: not kind.visibleRegion().isEmpty())  # the form's first field is in view, unscrolled


def test_a_running_benchmark_shows_in_the_header_with_its_progress(qtbot, open_window):
    from ddpstudio.core.bench.model import BenchProgress

    window = open_window()
    window.bench.bench_progress.emit(BenchProgress("per-rank batch", 2, 1, 2, "measuring", 10, 20))
    assert window.progress.state.text() == "Benchmark: run 2 of 2"
    assert window.progress.bar.value() == 75 and "2 ranks · measuring" in window.progress.bar.format()
    window.bench.bench_finished.emit(None)
    assert window.progress.state.text() == "Ready"


def test_the_clean_up_question_says_what_goes_and_what_an_unticked_program_keeps():
    from ddpstudio.core.cleanup.findings import ProcessInfo, StaleStore
    from ddpstudio.gui.cleanup_question import confirmation

    a, b = StaleStore(path="/s/a", reason="left by run r1"), StaleStore(path="/s/b", reason="left by run r2")
    orphan = ProcessInfo(pid=11, name="python", cmdline="python -m ddpstudio.rank.recipe", run_id="r1", rank=0,
                         ours=True)
    editor = ProcessInfo(pid=22, name="notepad", cmdline="notepad /s/b", path="/s/b")
    text = confirmation([a, b], [orphan], [], [editor])
    assert text.splitlines() == [
        "Delete 1 stale store file(s):", "  /s/a",
        "Stop 1 process(es) DDP Studio started and that were left running (asked to end, then killed if they "
        "do not):", "  pid 11 (python), rank 0 of run r1",
        "Cannot delete 1 file(s): a program you did not tick holds it open (tick that program to stop it, or "
        "close it yourself):", "  /s/b (held by pid 22 (notepad))"]
    ticked = confirmation([a, b], [], [editor], [editor])
    assert "Delete 2 stale store file(s)" in ticked and "did not start" in ticked and "Cannot" not in ticked


def test_help_links_to_the_docs_that_ship_beside_the_package(qtbot, open_window):
    from ddpstudio.gui.window_explain import DOCS, doc_path

    window = open_window()
    help_menu = window.menuBar().actions()[-1].menu()
    texts = [a.text() for a in help_menu.actions()]
    assert all(text in texts for text, _ in DOCS)
    assert all(doc_path(relative).is_file() for _, relative in DOCS)


def test_rank_exits_say_who_ended_the_rank():
    from ddpstudio.core.platform import Platform
    from ddpstudio.gui.exit_words import rank_exit_text

    posix, windows = LINUX, Platform(system="windows")
    assert rank_exit_text(-15, posix, stopping=True) == "stopped by the launcher's polite signal (killed by SIGTERM)"
    assert rank_exit_text(-2, posix, stopping=True) == "stopped: it obeyed the stop request (killed by SIGINT)"
    assert rank_exit_text(-9, posix, stopping=True).startswith("killed by the launcher: still running after the grace")
    assert rank_exit_text(-9, posix, stopping=False) == "killed by SIGKILL"  # not ours to explain
    assert rank_exit_text(-11, posix, stopping=True) == "killed by SIGSEGV"
    assert rank_exit_text(3221225786, windows, stopping=True).startswith("stopped: it obeyed the stop request")
