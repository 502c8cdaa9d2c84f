"""The real window under pytest-qt: waits on signals and conditions, never on sleeps.

Runs here are real: the launcher in a QProcess, two CPU ranks over Gloo
running the built-in recipe (tiny settings) or small crashing scripts.
GPUs come through the documented seam (FakeGpuSource); "no NVML" is modelled
the same way so the tests mean the same on a machine that has a GPU.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import psutil
import pytest
from PySide6.QtCore import Qt

from tests.conftest import live_processes_of, processes_of
from ddpstudio.core import paths, protocol
from ddpstudio.core.gpu import FakeGpuSource
from ddpstudio.gui.dialogs import ScriptedDialogs
from ddpstudio.gui.form_state import SetupState
from ddpstudio.gui.machine_panel import CPU_MODE_TEXT, CpuCard, GpuCard
from ddpstudio.gui.mainwindow import MainWindow

pytestmark = pytest.mark.gui
RUN_TIMEOUT_MS = 120_000
# The built-in perceptron on 8x8 images: these runs are about the window, not the recipe's model.
DEMO = SetupState(model="mlp", batch_size=8, image_size=8, max_steps=3)
LONG = SetupState(model="mlp", batch_size=8, image_size=8, max_steps=0, epochs=100_000)


def no_nvml() -> FakeGpuSource:
    return FakeGpuSource(gpus=[], nvml_state="not available: the NVIDIA driver library (NVML) was not found",
                         driver_version=None, cuda_driver_version=None)


@pytest.fixture
def open_window(qtbot):
    """open_window(state=None, source=None, dialogs=None) -> a shown MainWindow whose setup has been checked."""
    windows = []

    def make(state: SetupState | None = None, source=None, dialogs=None) -> MainWindow:
        window = MainWindow(dialogs=dialogs or ScriptedDialogs(yes=True), gpu_source=source or no_nvml())
        qtbot.addWidget(window)
        windows.append(window)
        if state is not None:
            window.form.set_state(state)
        window.show()
        qtbot.waitUntil(lambda: window.check.latest is not None and not window.check.pending,
                        timeout=RUN_TIMEOUT_MS)
        return window

    yield make
    for window in windows:  # a failed test must not leave a run (or a sampler thread) behind
        if window.controller.active:
            with qtbot.waitSignal(window.controller.run_finished, timeout=30_000):
                window.controller.stop()
        window.close()


def launch(qtbot, window: MainWindow) -> None:
    qtbot.waitUntil(window.launch_button.isEnabled, timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(window.controller.run_started, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(window.launch_button, Qt.MouseButton.LeftButton)


def wait_for_steps(qtbot, window: MainWindow, steps: int = 1) -> None:
    qtbot.waitUntil(lambda: window.metrics is not None and window.metrics.step >= steps, timeout=RUN_TIMEOUT_MS)


def assert_nothing_left(qtbot, home) -> None:
    def gone():
        return not live_processes_of(home)
    qtbot.waitUntil(gone, timeout=10_000)


def curve_points(plot, key) -> int:
    x, _ = plot.curves[key].getData()
    return 0 if x is None else len(x)


def write_script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return str(path)


# -- the machine panel ---------------------------------------------------------------
def test_without_nvml_the_machine_panel_shows_cpu_mode(qtbot, open_window):
    window = open_window()
    qtbot.waitUntil(lambda: window.machine_panel.inventory is not None)
    cards = window.machine_panel.cards
    assert len(cards) == 1 and isinstance(cards[0], CpuCard)
    assert cards[0].title.text() == CPU_MODE_TEXT
    assert "NVML" in cards[0].detail.text()
    reasons = window.machine_panel.decisions.text()
    assert "Gloo" in reasons and "FileStore" in reasons
    assert window.plots.load.widget.getPlotItem().titleLabel.text == "CPU load per rank"


def test_injected_gpus_get_one_card_and_one_curve_each(qtbot, open_window):
    source = FakeGpuSource(gpus=[
        {"name": "NVIDIA RTX A6000", "total_memory_mb": 49140, "utilization_pct": 10, "memory_used_mb": 1024},
        {"name": "NVIDIA RTX A6000", "total_memory_mb": 49140, "utilization_pct": 20, "memory_used_mb": 2048},
    ])
    window = open_window(source=source)
    qtbot.waitUntil(lambda: window.machine_panel.inventory is not None)
    cards = window.machine_panel.cards
    assert [type(c) for c in cards] == [GpuCard, GpuCard]
    assert "RTX A6000" in cards[0].title.text() and "driver 555.85" in cards[0].detail.text()
    source.update(1, utilization_pct=87)
    qtbot.waitUntil(lambda: cards[1].util.format() == "load 87%", timeout=10_000)
    plots = window.plots
    qtbot.waitUntil(lambda: set(plots.load.curves) == {0, 1} and curve_points(plots.load, 1) >= 1, timeout=10_000)
    assert set(plots.memory.curves) == {0, 1}
    assert plots.load.widget.getPlotItem().titleLabel.text == "GPU utilisation"
    assert "NCCL" in window.machine_panel.decisions.text()  # Linux with CUDA GPUs: the chosen backend and why


# -- the form ----------------------------------------------------------------------------
@pytest.mark.posix_only("/proc refuses new files on Linux only")
def test_invalid_input_shows_the_reason_and_keeps_launch_disabled(qtbot, open_window, tmp_path):
    window = open_window(DEMO)
    form = window.form
    qtbot.waitUntil(window.launch_button.isEnabled, timeout=RUN_TIMEOUT_MS)

    form.editors["workload"].setCurrentIndex(form.editors["workload"].findData("script-args"))
    qtbot.keyClicks(form.editors["script_path"].edit, str(tmp_path / "missing" / "train.py"))
    qtbot.waitUntil(lambda: "does not exist" in form.problem_text("script"), timeout=RUN_TIMEOUT_MS)
    assert not window.launch_button.isEnabled() and not window.launch_action.isEnabled()
    assert "border" in form.editors["script_path"].edit.styleSheet()  # the field is marked red

    form.editors["workload"].setCurrentIndex(form.editors["workload"].findData("recipe"))
    qtbot.keyClicks(form.editors["checkpoint_dir"].edit, "/proc/ddpstudio-test/checkpoints")
    qtbot.waitUntil(lambda: "not writable" in form.problem_text("checkpoint_dir"), timeout=RUN_TIMEOUT_MS)
    assert form.problem_text("script") == ""  # the script field is hidden and no longer judged
    assert not window.launch_button.isEnabled()

    form.editors["checkpoint_dir"].setText(str(tmp_path / "checkpoints"))
    qtbot.waitUntil(window.launch_button.isEnabled, timeout=RUN_TIMEOUT_MS)
    assert form.problem_text("checkpoint_dir") == ""


def mnemonics(window: MainWindow) -> list[str]:
    """The Alt+letter keys of what shows at once: menus, buttons and field labels."""
    from PySide6.QtWidgets import QAbstractButton, QLabel

    texts = [a.text() for a in window.menuBar().actions()]
    texts += [b.text() for b in window.findChildren(QAbstractButton) if b.isVisibleTo(window)]
    texts += [lb.text() for lb in window.findChildren(QLabel) if lb.buddy() is not None and lb.isVisibleTo(window)]
    return [t[t.index("&") + 1].lower() for t in texts if "&" in t.replace("&&", "")]


def test_the_window_is_keyboard_reachable(qtbot, open_window):
    window = open_window(DEMO)
    for workload in ("recipe", "script-args"):
        window.form.editors["workload"].setCurrentIndex(window.form.editors["workload"].findData(workload))
        keys = mnemonics(window)
        assert len(keys) == len(set(keys)) and len(keys) >= 10, sorted(keys)
    assert window.launch_action.shortcut().toString() == "F5"
    assert window.stop_action.shortcut().toString() == "Shift+F5"
    assert window.launch_button.focusPolicy() & Qt.FocusPolicy.TabFocus


def test_reopening_restores_the_last_setup(qtbot, open_window):
    window = open_window()
    # The perceptron (not the default resnet18): a model the form's check needs no torchvision import to judge.
    wanted = SetupState(model="mlp", batch_size=24, batch_mode="split", scale_lr=True,
                        store="tcp", max_steps=7, workers=1, lr=0.02, balance="measured", on_hang="stop")
    window.form.set_state(wanted)
    window.close()
    assert not window.isVisible()
    again = open_window()
    assert again.form.state() == wanted
    assert again.size() == window.size()


def test_the_exception_hook_logs_everything_and_shows_one_dialog(qtbot, tmp_path):
    from ddpstudio.gui.excepthook import ExceptionHook

    dialogs = ScriptedDialogs()
    hook = ExceptionHook(dialogs, log_path=tmp_path / "logs" / "gui.log")
    hook.install()
    try:
        for message in ("first failure", "second failure"):
            try:
                raise RuntimeError(message)
            except RuntimeError:
                sys.excepthook(*sys.exc_info())
        qtbot.waitUntil(lambda: len(dialogs.asked) == 1)
    finally:
        hook.uninstall()
    text = (tmp_path / "logs" / "gui.log").read_text()
    assert "first failure" in text and "second failure" in text
    assert "gui.log" in dialogs.asked[0][1] and hook.count == 2


# -- runs ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_demo_run_plots_both_ranks_and_the_global_curve_then_reloads(qtbot, open_window, studio_home):
    window = open_window(DEMO)
    launch(qtbot, window)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        pass
    assert finished.args[0].get("state") == "finished"
    assert window.controller.state.value == "finished"
    qtbot.waitUntil(lambda: not window.render_timer.isActive(), timeout=10_000)  # drawn, then idle
    loss = window.plots.loss
    assert {0, 1, "global"} <= set(loss.curves)
    assert all(curve_points(loss, key) == 3 for key in (0, 1, "global"))
    assert curve_points(window.plots.rate, "global") == 3
    assert window.progress.bar.value() == 100
    assert "rank 0" in window.log_view.shown_text()
    assert_nothing_left(qtbot, studio_home)

    # Past runs: listed, reopened with their curves, and "run again" fills the form.
    qtbot.waitUntil(lambda: len(window.runs_panel.runs) == 1, timeout=10_000)
    window.form.set_state(SetupState(batch_size=99))
    window.tabs.setCurrentWidget(window.runs_panel)
    with qtbot.waitSignal(window.past_run_shown, timeout=30_000):
        window.runs_panel.tree.setCurrentItem(window.runs_panel.tree.topLevelItem(0))
    assert curve_points(window.plots.loss, "global") == 3
    assert "finished" in window.runs_panel.details.toPlainText()
    qtbot.mouseClick(window.runs_panel.again_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.form.state() == DEMO, timeout=30_000)


@pytest.mark.slow
def test_stop_mid_run_ends_stopped_with_no_process_left(qtbot, open_window, studio_home):
    window = open_window(LONG)
    launch(qtbot, window)
    wait_for_steps(qtbot, window, 2)
    assert window.history.cpu_pct, "per-rank CPU load is measured once the ranks run"
    qtbot.waitUntil(lambda: "rank 1:" in window.machine_panel.cards[0].ranks.text(), timeout=10_000)
    pids = list(window.controller.pids.values()) + [window.controller.process.processId()]
    asked = time.monotonic()
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)
    took = time.monotonic() - asked
    assert finished.args[0].get("state") == "stopped"
    assert window.progress.state.text() == "Stopped"
    assert took < 10, f"stopping took {took:.1f} s"
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert_nothing_left(qtbot, studio_home)
    assert window.launch_button.isEnabled()


@pytest.mark.slow
def test_closing_the_window_mid_run_stops_it_and_leaves_nothing(qtbot, open_window, studio_home):
    dialogs = ScriptedDialogs(yes=True)
    # One rank: closing stops through the same controller.stop() that test_stop_mid_run checks on two ranks.
    window = open_window(replace(LONG, world_size=1), dialogs=dialogs)
    launch(qtbot, window)
    wait_for_steps(qtbot, window, 1)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        window.close()
    assert dialogs.asked and "in progress" in dialogs.asked[-1][1]
    assert finished.args[0].get("state") == "stopped"
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=10_000)
    assert_nothing_left(qtbot, studio_home)


@pytest.mark.slow
def test_a_crashing_script_shows_its_root_cause_and_hint(qtbot, open_window, tmp_path):
    # Rank 1 fails only once rank 0 has printed: under load rank 0 could start so late that the run was over
    # (and rank 0 stopped) before its line, and the log check below failed once in a parallel run.
    script = write_script(tmp_path, "train.py", f"""
        import os, sys, time
        rank = int(sys.argv[sys.argv.index("--rank") + 1])
        print(f"rank {{rank}} starting", flush=True)
        started = {str(tmp_path / "rank0-started")!r}
        if rank == 0:
            open(started, "w").close()
        if rank == 1:
            deadline = time.monotonic() + 60
            while not os.path.exists(started) and time.monotonic() < deadline:
                time.sleep(0.05)
            raise RuntimeError("use_libuv was requested but PyTorch was build without libuv support")
        time.sleep(60)
    """)
    window = open_window(SetupState(workload="script-args", script_path=script))
    launch(qtbot, window)
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        pass
    assert finished.args[0].get("state") == "failed"
    panel = window.error_panel
    assert panel.isVisible() and panel.kind == "failure"
    assert "rank 1 failed first" in panel.summary.text() and "use_libuv was requested" in panel.summary.text()
    assert [h.key for h in panel.shown_hints] == ["libuv"]
    assert "Traceback" in panel.details.toPlainText()
    assert "rank 0 starting" in window.log_view.shown_text()


@pytest.mark.slow
def test_a_leftover_on_a_fixed_store_path_is_removed_visibly_before_launch(qtbot, open_window, studio_home, tmp_path):
    store = tmp_path / "fixed.store"
    window = open_window()
    make_leftover(qtbot, window, tmp_path, store)
    assert store.exists()

    launch(qtbot, window)  # the same fixed path again: the leftover is found, removed, and said so
    notes = [line for rank, stream, line, _t in window.log_view.lines if stream == "studio"]
    assert any("removed the leftover store file" in line and str(store) in line for line in notes)
    assert "removed the leftover store file" in window.statusBar().currentMessage()
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS):
        window.controller.stop()
    assert_nothing_left(qtbot, studio_home)


@pytest.mark.posix_only("kills the run with os.killpg and SIGKILL")
def test_a_store_file_that_is_not_our_leftover_blocks_the_launch(qtbot, open_window, studio_home, tmp_path):
    store = tmp_path / "someone-elses.store"
    store.write_text("not ours")
    window = open_window(SetupState(batch_size=8, store="fixed", store_path=str(store)))
    qtbot.waitUntil(window.launch_button.isEnabled, timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(window.launch_blocked, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(window.launch_button, Qt.MouseButton.LeftButton)
    assert "no DDP Studio run left it there" in window.form.problem_text("store_path")
    assert window.error_panel.isVisible() and "Launch blocked" in window.error_panel.text()
    assert store.read_text() == "not ours" and not window.controller.active
    assert not processes_of(studio_home)


def make_leftover(qtbot, window: MainWindow, tmp_path, store) -> None:
    """A cheap killed run (a script, no torch) whose rank 0 wrote the fixed store file."""
    script = write_script(tmp_path, "hold.py", """
        import sys, time
        url = sys.argv[sys.argv.index("--dist-url") + 1]
        if int(sys.argv[sys.argv.index("--rank") + 1]) == 0:
            open(url.removeprefix("file://"), "w").write("a store a killed run left behind")
        print("holding", flush=True)
        time.sleep(120)
    """)
    window.form.set_state(SetupState(workload="script-args", script_path=script, store="fixed",
                                     store_path=str(store)))
    launch(qtbot, window)
    qtbot.waitUntil(lambda: store.exists() and len(window.controller.pids) == 2, timeout=RUN_TIMEOUT_MS)
    kill_run(qtbot, window)


@pytest.mark.slow
def test_clean_up_lists_foreign_holders_apart_and_stops_them_only_when_ticked(
        qtbot, open_window, studio_home, tmp_path):
    store = tmp_path / "held.store"
    window = open_window()
    make_leftover(qtbot, window, tmp_path, store)
    foreign = psutil.Popen([sys.executable, "-c", f"import time; f = open({str(store)!r}); time.sleep(120)"])
    try:
        qtbot.waitUntil(lambda: any(f.path == str(store) for f in foreign.open_files()), timeout=30_000)
        qtbot.mouseClick(window.cleanup_button, Qt.MouseButton.LeftButton)
        dialog = window.cleanup_dialog
        qtbot.waitUntil(lambda: dialog.findings is not None, timeout=RUN_TIMEOUT_MS)
        assert [p.pid for p in dialog.findings.foreign] == [foreign.pid]
        ticked = dialog.ticked()
        assert [s.path for s in ticked["stale"]] == [str(store)] and ticked["foreign"] == []
        assert "did not start" in dialog.result_text() and "-c import time" in dialog.result_text()

        with qtbot.waitSignal(dialog.clean_finished, timeout=RUN_TIMEOUT_MS) as first:
            qtbot.mouseClick(dialog.clean_button, Qt.MouseButton.LeftButton)
        assert store.exists() and foreign.is_running()  # unticked: left alone, and the file with it
        assert any(str(store) in what and "held open" in why for what, why in first.args[0].left)

        with qtbot.waitSignal(dialog.scan_finished, timeout=RUN_TIMEOUT_MS):
            qtbot.mouseClick(dialog.rescan_button, Qt.MouseButton.LeftButton)
        head = next(dialog.tree.topLevelItem(i) for i in range(dialog.tree.topLevelItemCount())
                    if "did not start" in dialog.tree.topLevelItem(i).text(0))
        head.child(0).setCheckState(0, Qt.CheckState.Checked)
        with qtbot.waitSignal(dialog.clean_finished, timeout=RUN_TIMEOUT_MS) as second:
            qtbot.mouseClick(dialog.clean_button, Qt.MouseButton.LeftButton)
        assert "did not start" in window.dialogs.asked[-1][1]  # the question named the foreign program
        assert foreign.pid in [p.pid for p in second.args[0].killed] and not store.exists()
        foreign.wait(10)
    finally:
        if foreign.is_running():
            foreign.kill()
    dialog.close()


def kill_run(qtbot, window: MainWindow) -> None:
    """What a crash or Task Manager does: SIGKILL to every process of the run, the launcher last."""
    ranks = list(window.controller.pids.values())
    launcher = window.controller.process.processId()
    assert launcher > 0, "the launcher is not running: nothing to kill"
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS):
        for pid in [launcher] + ranks:
            assert pid > 0 and pid != os.getpgrp(), f"{pid} would signal the test's own process group"
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
@pytest.mark.posix_only("kills the run with os.killpg and SIGKILL")
def test_clean_up_removes_a_real_stale_store_and_shows_the_result(qtbot, open_window, studio_home, tmp_path):
    store = tmp_path / "pg.store"
    # One rank: a lone rank meets in the same FileStore file, and its kill leaves the file just the same.
    window = open_window(replace(LONG, store="fixed", store_path=str(store), world_size=1))
    launch(qtbot, window)
    wait_for_steps(qtbot, window, 1)  # the ranks have met in the store file
    kill_run(qtbot, window)
    assert store.exists(), "a killed run leaves its FileStore behind"
    assert_nothing_left(qtbot, studio_home)

    qtbot.mouseClick(window.cleanup_button, Qt.MouseButton.LeftButton)
    dialog = window.cleanup_dialog
    qtbot.waitUntil(lambda: dialog.findings is not None, timeout=RUN_TIMEOUT_MS)
    assert str(store) in [s.path for s in dialog.findings.stale_stores]
    assert dialog.ticked()["stale"]
    with qtbot.waitSignal(dialog.clean_finished, timeout=RUN_TIMEOUT_MS) as cleaned:
        qtbot.mouseClick(dialog.clean_button, Qt.MouseButton.LeftButton)
    report = cleaned.args[0]
    assert str(store) in report.deleted and not store.exists()
    assert str(store) in dialog.result_text() and "Deleted" in dialog.status.text()
    assert window.dialogs.asked[-1][0] == "Clean up"  # exactly one confirmation
    dialog.close()


def test_on_windows_the_launcher_runs_under_python_exe_with_nothing_asked_of_qprocess():
    """The Windows branch, through the platform seam, against the real pinned QProcess (no stand-in).

    The window runs under pythonw.exe; the launcher must not (no console: cpython #112190).
    PySide6 6.11.3 has no setCreateProcessArgumentsModifier on any platform: nothing may need it.
    """
    from PySide6.QtCore import QProcess

    from ddpstudio.core.platform import WINDOWS
    from ddpstudio.gui.run_controller import RunController, launcher_python

    scripts = r"C:\Users\me\AppData\Local\Programs\DDPStudio\env\Scripts"
    python = scripts + r"\python.exe"
    assert launcher_python(scripts + r"\pythonw.exe", WINDOWS, exists=lambda p: p == python) == python
    assert not hasattr(QProcess, "setCreateProcessArgumentsModifier")
    proc = QProcess()
    RunController(WINDOWS)._detach(proc)  # must not fail, and sets nothing POSIX-only
    assert proc.unixProcessParameters().flags == QProcess.UnixProcessFlag(0)


def test_the_package_ships_the_repository_icons(qapp):
    from pathlib import Path

    from ddpstudio.gui.icon import RESOURCES, app_icon

    repo = Path(__file__).resolve().parents[1] / "resources"
    for name in ("ddpstudio.png", "ddpstudio.ico"):
        assert (RESOURCES / name).read_bytes() == (repo / name).read_bytes(), f"copy resources/{name} again"
    assert not app_icon().isNull()


def test_pyside_calls_do_not_wear_out_none_and_true():
    """PySide6 6.12.0 returns None/True without a reference; on Python 3.11 that aborts the window.

    constraints.txt pins 6.11.3. Run in a child so a regression is a clear failure, not a crash.
    """
    code = (
        "import sys\n"
        "from PySide6.QtCore import QObject, Signal\n"
        "class Sender(QObject):\n"
        "    happened = Signal(object, str)\n"
        "s = Sender(); got = []\n"
        "s.happened.connect(lambda v, t: got.append(v))\n"
        "n, t = sys.getrefcount(None), sys.getrefcount(True)\n"
        "for _ in range(200_000):\n"
        "    s.happened.emit(None, 'x'); s.setObjectName('s')\n"
        "assert len(got) == 200_000\n"
        "print(sys.getrefcount(None) - n - len(got), sys.getrefcount(True) - t)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"PySide6 wears out None/True (pin PySide6-Essentials 6.11.3): {res.stderr[-500:]}"
    none_delta, true_delta = map(int, res.stdout.split())
    # A regression loses one reference per call (about -200,000 here). A drift of one or two comes from
    # unrelated objects freed meanwhile (seen once as -1 in a full run on a loaded machine): not a leak.
    assert none_delta > -100 and true_delta > -100, (none_delta, true_delta)


def test_mixed_gpus_show_balanced_batches_and_each_ranks_batch_when_measured(qtbot, open_window):
    source = FakeGpuSource(gpus=[
        {"name": "NVIDIA GeForce RTX 4090", "total_memory_mb": 24564},
        {"name": "NVIDIA GeForce RTX 3060", "total_memory_mb": 12288},
    ])
    window = open_window(source=source)
    qtbot.waitUntil(lambda: "the GPUs differ (NVIDIA GeForce RTX 4090, NVIDIA GeForce RTX 3060)"
                    in window.machine_panel.decisions.text(), timeout=RUN_TIMEOUT_MS)
    # What the recipe's rank 0 says once it has measured (rank/balance.py), through the controller's parser.
    line = protocol.make_event(protocol.BATCH_BALANCED, batches=[40, 24],
                               reason="batches balanced by measured speed (global batch 64 kept): rank 0 batch 40 "
                                      "(1 ms per sample + 0 ms per step); rank 1 batch 24 (1.67 ms per sample + "
                                      "0 ms per step)").to_line()
    with qtbot.waitSignal(window.controller.batch_balanced, timeout=5_000):
        for ev in window.controller.parser.feed(line):
            getattr(window.controller, f"_handle_{ev.type}")(ev)
    assert "rank 1 batch 24 (1.67 ms per sample" in window.machine_panel.decisions.text()
