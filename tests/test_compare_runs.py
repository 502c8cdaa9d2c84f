"""Real runs, kept and compared: three demo runs (1 rank, 2 ranks, 2 ranks with another batch) through
the real launcher, then the history they left, ``ddpstudio runs``/``export``, and the window's Runs and
Compare tabs on them (pytest-qt, waiting on signals)."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest
from PySide6.QtCore import Qt

from tests.conftest import processes_of, seed_cache
from tests.studio import ddpstudio
from ddpstudio.core import protocol
from ddpstudio.core.cleanup import registry
from ddpstudio.core.metrics import compare, rows
from ddpstudio.core.metrics.compare import XAxis
from ddpstudio.core.metrics.history import read_history
from ddpstudio.core.process.proctable import create_time
from ddpstudio.gui.dialogs import ScriptedDialogs

# Every test reads the three real runs of the module fixture, or trains itself: the slow tier.
pytestmark = pytest.mark.slow
RUNS = ((1, 8), (2, 8), (2, 16))  # (world size, batch per rank)
STEPS = 5


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory, warm_cache) -> tuple[str, list[str]]:
    """The DDP Studio home of three finished real runs, and their folders in RUNS order."""
    home = seed_cache(tmp_path_factory.mktemp("compare-home"), warm_cache)
    env = {**os.environ, "DDPSTUDIO_HOME": str(home)}
    procs = [subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--demo", "--json", "--world-size", str(ws),
                               "--model", "mlp", "--batch-size", str(batch), "--max-steps", str(STEPS),
                               "--image-size", "8", "--rendezvous-timeout", "120"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
             for ws, batch in RUNS]
    folders = []
    for proc in procs:
        out, err = proc.communicate(timeout=280)
        assert proc.returncode == 0, err[-2000:]
        parser = protocol.EventParser()
        started = [e for line in out.splitlines() for e in parser.feed(line) if e.type == protocol.RUN_STARTED]
        folders.append(started[0].get("run_dir"))
    assert not [p for p in processes_of(home) if p.is_running()]
    return str(home), folders


@pytest.fixture
def home(three_runs, monkeypatch) -> str:
    monkeypatch.setenv("DDPSTUDIO_HOME", three_runs[0])
    return three_runs[0]


def merged_steps(folder: str) -> list[protocol.Event]:
    parser = protocol.EventParser()
    with open(os.path.join(folder, "events.jsonl"), encoding="utf-8") as fh:
        return [e for line in fh for e in parser.feed(line) if e.type in (protocol.STEP, protocol.GLOBAL_STEP)]


def copy_run(folder: str, new_id: str) -> str:
    """A second real run folder (and registry record) from a finished one, for tests that delete."""
    target = os.path.join(os.path.dirname(folder), new_id)
    shutil.copytree(folder, target)
    record = registry.read_record(registry.record_path(os.path.basename(folder)))
    record.run_id, record.run_dir = new_id, target
    registry.write_record(record)
    plan_path = os.path.join(target, "plan.json")
    plan = json.load(open(plan_path, encoding="utf-8"))
    plan.update(run_id=new_id, run_dir=target)
    json.dump(plan, open(plan_path, "w", encoding="utf-8"))
    return target


# -- what a run keeps -------------------------------------------------------------------
def test_the_history_holds_every_step_and_load_sample_of_a_real_run(three_runs):
    _, folders = three_runs
    for folder, (ws, batch) in zip(folders, RUNS):
        history = read_history(folder)
        assert history.skipped == 0 and history.effective_batch == ws * batch
        events = merged_steps(folder)
        for rank in range(ws):
            steps = [e for e in events if e.type == protocol.STEP and e.rank == rank]
            track = history.track(rows.LOSS, rank)
            assert track.step == [e.get("step") for e in steps] == list(range(1, STEPS + 1))
            assert track.value == pytest.approx([e.get("loss") for e in steps], rel=1e-5)
            assert track.t == pytest.approx([e.t - history.t0 for e in steps], abs=2e-3)
            load = history.track(rows.CPU_PCT, rank)
            assert len(load) >= 2 and load.t == sorted(load.t)  # sampled every second by the launcher
            assert min(history.track(rows.RSS_MB, rank).value) > 10
        glob = [e for e in events if e.type == protocol.GLOBAL_STEP]
        assert history.track(rows.GLOBAL_LOSS).value == pytest.approx([e.get("loss") for e in glob], rel=1e-5)
        assert len(history.track(rows.SAMPLES_PER_S)) == STEPS


def test_runs_lists_every_run_with_its_facts(home, three_runs):
    listed = ddpstudio("runs", "--json")
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    by_dir = {r["run_dir"]: r for r in report["runs"]}
    assert set(by_dir) == set(three_runs[1])
    for folder, (ws, batch) in zip(three_runs[1], RUNS):
        run = by_dir[folder]
        history = read_history(folder)
        assert (run["state"], run["world_size"], run["backend"], run["batch_size"]) == ("finished", ws, "gloo", batch)
        assert run["final_loss"] == history.track(rows.GLOBAL_LOSS).value[-1]
        rates = history.track(rows.SAMPLES_PER_S).value
        assert run["mean_samples_per_s"] == pytest.approx(sum(rates) / len(rates))
        assert run["duration_s"] > 0 and run["size_bytes"] > 1000 and run["origin"] == "run"
    assert report["total_bytes"] == sum(r["size_bytes"] for r in report["runs"])
    text = ddpstudio("runs")
    assert "final loss" in text.stdout and "3 run(s)" in text.stdout
    assert all(os.path.basename(f) in text.stdout for f in three_runs[1])


def test_runs_delete_removes_files_and_record_and_refuses_a_live_run(home, three_runs):
    gone = copy_run(three_runs[1][0], "20990101-000000-gone00")
    live = copy_run(three_runs[1][0], "20990101-000000-live00")
    os.remove(os.path.join(live, "result.json"))
    me = os.getpid()  # this process stands as the live run's launcher: alive, with its create time
    registry.record_start("20990101-000000-live00", run_dir=live, launcher_pid=me,
                          launcher_create_time=create_time(me))
    refused = ddpstudio("runs", "delete", "20990101-000000-gone00", "20990101-000000-live00")
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("ddpstudio: error: run 20990101-000000-live00 is still running")
    assert os.path.isdir(gone) and os.path.isdir(live)  # nothing deleted
    unknown = ddpstudio("runs", "delete", "no-such-run")
    assert unknown.returncode == 2 and "no run named 'no-such-run'" in unknown.stderr
    done = ddpstudio("runs", "delete", "20990101-000000-gone00")
    assert done.returncode == 0, done.stderr
    assert not os.path.exists(gone) and not registry.record_path("20990101-000000-gone00").exists()
    registry.record_end("20990101-000000-live00", "stopped")
    assert ddpstudio("runs", "delete", "20990101-000000-live00").returncode == 0


def test_export_writes_csv_and_tensorboard_files_that_read_back(home, three_runs, tmp_path):
    folder = three_runs[1][1]
    history = read_history(folder)
    out = ddpstudio("export", os.path.basename(folder), "--csv", str(tmp_path / "run.csv"))
    assert out.returncode == 0, out.stderr
    with open(tmp_path / "run.csv", newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert [float(r["value"]) for r in table if r["metric"] == "loss" and r["key"] == "1"] == \
        history.track(rows.LOSS, 1).value
    assert {r["metric"] for r in table} >= {"loss", "global_loss", "samples_per_s", "cpu_pct", "rss_mb"}
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        missing = ddpstudio("export", folder, "--tensorboard", str(tmp_path / "tb"))
        assert missing.returncode == 2 and "'tensorboard'" in missing.stderr
        pytest.skip("TensorBoard is not installed (optional group 'tensorboard'): its files cannot be read back")
    tb = ddpstudio("export", folder, "--tensorboard", str(tmp_path / "tb"))
    assert tb.returncode == 0, tb.stderr
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    loss = acc.Scalars("train/loss")
    assert [s.step for s in loss] == list(range(1, STEPS + 1))
    assert [s.value for s in loss] == pytest.approx(history.track(rows.GLOBAL_LOSS).value, rel=1e-6)
    assert [s.wall_time for s in loss] == pytest.approx([history.t0 + t for t in history.track(rows.GLOBAL_LOSS).t])
    assert "load/cpu_pct/rank1" in acc.Tags()["scalars"]


def test_export_bad_input_is_one_clear_line(home, tmp_path):
    for args, words in ((["nope", "--csv", str(tmp_path / "x.csv")], "no run 'nope'"),
                        (["nope"], "--tensorboard DIR and/or --csv FILE")):
        out = ddpstudio("export", *args)
        assert out.returncode == 2 and out.stderr.startswith("ddpstudio: error: ") and words in out.stderr
    assert not (tmp_path / "x.csv").exists()


# -- the window ------------------------------------------------------------------------------
@pytest.fixture
def window(qtbot, home):
    """The real window over the three runs' home, its questions answered by ScriptedDialogs."""
    from ddpstudio.gui.mainwindow import MainWindow
    from tests.test_gui_window import no_nvml

    made = MainWindow(dialogs=ScriptedDialogs(yes=True), gpu_source=no_nvml())
    qtbot.addWidget(made)
    made.show()
    qtbot.waitUntil(lambda: len(made.runs_panel.runs) >= len(RUNS), timeout=30_000)
    yield made
    made.close()


def curve_data(view, folder: str) -> tuple[list[float], list[float]]:
    x, y = view.curves[os.path.basename(folder)].getData()
    return list(x), list(y)


def test_compare_overlays_three_real_runs_as_stored(qtbot, window, three_runs):
    folders = three_runs[1]
    panel, view = window.runs_panel, window.run_view.compare_view
    panel.select_dirs(folders)
    assert panel.selected_dirs() == folders
    with qtbot.waitSignal(view.compared, timeout=30_000) as done:
        qtbot.mouseClick(panel.compare_button, Qt.MouseButton.LeftButton)
    assert done.args == [3] and window.tabs.currentWidget() is view
    assert view.x_axis is XAxis.WALL  # the blog's figure by default
    for i, (folder, (ws, batch)) in enumerate(zip(folders, RUNS)):
        track = read_history(folder).track(rows.GLOBAL_LOSS)
        assert curve_data(view, folder) == (track.t, track.value)
        name = view.legend.items[i][1].text
        assert f"{ws} rank" in name and f"batch {batch}/rank" in name
    view.set_x_axis(XAxis.STEP)
    assert curve_data(view, folders[2])[0] == list(range(1, STEPS + 1))
    view.set_x_axis(XAxis.SAMPLES)
    assert curve_data(view, folders[2])[0] == [s * 2 * 16 for s in range(1, STEPS + 1)]
    view.log_box.setChecked(True)
    assert view.plot.getPlotItem().ctrl.logYCheck.isChecked()
    # The table: the first run is the baseline; every run reached the default threshold (the worst final loss).
    assert view.table.rowCount() == 3
    assert view.table.item(0, 6).text().startswith("1.00x")
    threshold = view.threshold_value()
    finals = [compare.smoothed(read_history(f).track(rows.GLOBAL_LOSS).value)[-1] for f in folders]
    assert threshold == pytest.approx(max(finals), rel=1e-3)
    assert all(view.table.item(r, 2).text().endswith(" s") for r in range(3))
    view.log_box.setChecked(False)
    view.quantity_box.setCurrentText("samples/s")
    rates = read_history(folders[1]).track(rows.SAMPLES_PER_S)
    assert curve_data(view, folders[1])[1] == rates.value


def test_a_reopened_run_shows_its_load_curves_under_a_past_run_banner(qtbot, window, three_runs):
    folder = three_runs[1][1]
    history = read_history(folder)
    with qtbot.waitSignal(window.past_run_shown, timeout=30_000):
        window.runs_panel.select_dirs([folder])
    banner = window.run_view.past_banner
    assert banner.isVisible() and banner.text().startswith(f"Past run {os.path.basename(folder)}")
    qtbot.waitUntil(lambda: not window.render_timer.isActive(), timeout=10_000)
    load, memory = window.plots.load, window.plots.memory
    for rank in (0, 1):
        x, y = load.curves[rank].getData()
        assert list(y) == history.track(rows.CPU_PCT, rank).value
        assert list(x) == history.track(rows.CPU_PCT, rank).t
        assert list(memory.curves[rank].getData()[1]) == history.track(rows.RSS_MB, rank).value
    window.run_view.begin_run(window.metrics, [])
    assert not banner.isVisible()


def test_the_runs_tab_deletes_after_asking_and_exports(qtbot, window, three_runs, tmp_path):
    extra = copy_run(three_runs[1][0], "20990101-000000-gui000")
    panel = window.runs_panel
    with qtbot.waitSignal(panel.runs_listed, timeout=30_000):
        panel.refresh()
    dialogs = window.dialogs
    dialogs.paths = [str(tmp_path / "run.csv")]
    actions = window.run_view.runs_actions
    with qtbot.waitSignal(actions.done, timeout=30_000) as exported:
        panel.export_requested.emit(extra, "csv")  # what the run's context menu does
    assert "rows written" in exported.args[0]
    with open(tmp_path / "run.csv", newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == sum(len(t) for t in read_history(extra).tracks.values())
    panel.select_dirs([extra])
    with qtbot.waitSignal(panel.runs_listed, timeout=30_000):
        qtbot.mouseClick(panel.delete_button, Qt.MouseButton.LeftButton)
    assert dialogs.asked[-1][0] == "Delete runs" and "20990101-000000-gui000" in dialogs.asked[-1][1]
    assert not os.path.exists(extra) and not registry.record_path("20990101-000000-gui000").exists()
    assert len(panel.runs) == len(RUNS)


def test_the_training_run_can_be_compared_while_it_trains(qtbot, studio_home):
    from tests.test_gui_window import LONG, RUN_TIMEOUT_MS, launch, no_nvml, wait_for_steps
    from ddpstudio.gui.mainwindow import MainWindow

    window = MainWindow(dialogs=ScriptedDialogs(yes=True), gpu_source=no_nvml())
    qtbot.addWidget(window)
    # One rank: the Compare tab follows the run's global loss, which one rank writes as two would; a second rank
    # cost about 6 s of CPU before its first step.
    window.form.set_state(dataclasses.replace(LONG, world_size=1))
    window.show()
    try:
        launch(qtbot, window)
        wait_for_steps(qtbot, window, 1)
        panel, view = window.runs_panel, window.run_view.compare_view
        qtbot.waitUntil(lambda: any(r.live for r in panel.runs), timeout=30_000)  # listed as running
        [live] = [r.run_dir for r in panel.runs if r.live]
        panel.select_dirs([live])
        with qtbot.waitSignal(view.compared, timeout=30_000):
            qtbot.mouseClick(panel.compare_button, Qt.MouseButton.LeftButton)
        assert view.reload_timer.isActive() and "still training" in view.note.text()
        first = len(curve_data(view, live)[0])
        qtbot.waitUntil(lambda: len(curve_data(view, live)[0]) >= first + 2, timeout=RUN_TIMEOUT_MS)
        with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS):
            window.stop()
        qtbot.waitUntil(lambda: not view.reload_timer.isActive(), timeout=30_000)  # read once more, then rests
        assert curve_data(view, live) == (read_history(live).track(rows.GLOBAL_LOSS).t,
                                          read_history(live).track(rows.GLOBAL_LOSS).value)
    finally:
        if window.controller.active:
            with qtbot.waitSignal(window.controller.run_finished, timeout=30_000):
                window.controller.stop()
        window.close()
