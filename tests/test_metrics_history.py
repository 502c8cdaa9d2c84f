"""The metric history (rows, writer, reader), the compare computations and the exports, without a run.

Real files, a real sampler thread metering this very process, TensorBoard's
own event reader when TensorBoard is installed.
"""

from __future__ import annotations

import csv
import os
import time

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.gpu.model import GpuSample, ProcessSample, Snapshot
from ddpstudio.core.launch.history import HistoryWriter
from ddpstudio.core.metrics import compare, export, rows
from ddpstudio.core.metrics.catalog import BestEval, RunEntry, best_eval, final_loss
from ddpstudio.core.metrics.history import RunHistory, read_history
from ddpstudio.core.plan import Plan

T0 = 1_800_000_000.0


def ev(type_: str, t: float, rank: int | None = None, **data) -> protocol.Event:
    return protocol.make_event(type_, rank=rank, t=T0 + t, **data)


def plan(tmp_path, world_size: int = 2) -> Plan:
    return Plan(run_id="r1", run_dir=str(tmp_path), world_size=world_size, backend="gloo", device="cpu",
                store="file", init_method="file:///x", effective_batch=16)


def test_events_become_rows_and_other_events_none():
    assert rows.event_rows(ev(protocol.STEP, 1.5, rank=1, step=3, loss=2.0), T0) == [["loss", 1, 3, 1.5, 2.0]]
    assert rows.event_rows(ev(protocol.GLOBAL_STEP, 2.0, step=3, loss=1.25, samples_per_s=99.5), T0) == [
        ["global_loss", None, 3, 2.0, 1.25], ["samples_per_s", None, 3, 2.0, 99.5]]
    assert rows.event_rows(ev(rows.EVAL, 3.0, step=4, epoch=0, loss=0.5, top1=0.75, top5=1.0), T0) == [
        ["eval_loss", None, 4, 3.0, 0.5], ["eval_top1", None, 4, 3.0, 0.75], ["eval_top5", None, 4, 3.0, 1.0]]
    assert rows.event_rows(ev(protocol.STEP, 1.0, rank=0, step=1, loss=float("nan")), T0) == []
    assert rows.event_rows(ev(protocol.LOG, 1.0, rank=0, line="step 1 loss 2"), T0) == []


def test_snapshots_become_per_gpu_and_per_rank_rows():
    snap = Snapshot(t=T0 + 4.0, mode="gpu", gpus=(GpuSample(0, "x", 87.0, 2048.0, 8192.0, None, None),),
                    processes=(ProcessSample(111, 95.0, 300.0), ProcessSample(999, 50.0, 10.0)))
    assert rows.snapshot_rows(snap, {111: 1}, T0) == [
        ["gpu_util", 0, None, 4.0, 87.0], ["gpu_mem_gb", 0, None, 4.0, 2.0],
        ["cpu_pct", 1, None, 4.0, 95.0], ["rss_mb", 1, None, 4.0, 300.0]]


def test_writer_samples_its_ranks_and_a_torn_last_line_is_skipped(tmp_path):
    writer = HistoryWriter(str(tmp_path), plan(tmp_path), T0, interval_s=0.05)
    writer.watch({0: os.getpid()})  # this process stands as rank 0: metered by psutil for real
    for step in (1, 2, 3):
        writer.record(ev(protocol.STEP, step, rank=0, step=step, loss=3.0 - step))
    end = time.monotonic() + 10
    while time.monotonic() < end and len(read_history(tmp_path).track(rows.RSS_MB, 0)) < 3:
        time.sleep(0.05)
    writer.close()
    with open(tmp_path / rows.FILE_NAME, "a", encoding="utf-8") as fh:
        fh.write('["loss",0,4,4.0,')  # what a kill mid-write leaves
    history = read_history(tmp_path)
    assert history.skipped == 1
    assert history.header["run_id"] == "r1" and history.effective_batch == 16 and history.t0 == T0
    assert history.track(rows.LOSS, 0).value == [2.0, 1.0, 0.0]
    assert history.track(rows.LOSS, 0).step == [1, 2, 3]
    rss = history.track(rows.RSS_MB, 0)
    assert len(rss) >= 3 and all(v > 1 for v in rss.value)
    assert rss.t == sorted(rss.t)


def test_runs_older_than_the_history_file_are_read_from_their_events(tmp_path):
    lines = [ev(protocol.RUN_STARTED, 0.0, world_size=2, effective_batch=16, run_id="old"),
             ev(protocol.STEP, 1.0, rank=0, step=1, loss=2.0),
             ev(protocol.GLOBAL_STEP, 1.1, step=1, loss=1.9, samples_per_s=10.0)]
    (tmp_path / "events.jsonl").write_text("".join(e.to_line() + "\n" for e in lines) + '{"type":"st',
                                           encoding="utf-8")
    history = read_history(tmp_path)
    assert history.source == "events.jsonl" and history.effective_batch == 16
    assert history.track(rows.GLOBAL_LOSS).t == [1.1] and history.track(rows.LOSS, 0).value == [2.0]


def history_of(losses: list[float], dt: float, effective_batch: int, evals: list[float] = ()) -> RunHistory:
    h = RunHistory(rows.header(run_id="x", t0=T0, world_size=1, effective_batch=effective_batch))
    for i, loss in enumerate(losses, start=1):
        h.add(["global_loss", None, i, i * dt, loss])
        h.add(["samples_per_s", None, i, i * dt, effective_batch / dt])
    for i, acc in enumerate(evals, start=1):
        h.add(["eval_top1", None, i, i * dt, acc])
        h.add(["eval_loss", None, i, i * dt, 1 - acc])
    return h


def entry(run_id: str, world_size: int, duration: float, rate: float) -> RunEntry:
    return RunEntry(run_id, f"/runs/{run_id}", T0, duration, "finished", "run", "resnet18 on synthetic data",
                    world_size, "gloo", "cpu", 8, 8 * world_size, None, None, rate, 0)


def test_x_axes_threshold_time_and_speedup_against_the_first_run():
    one = compare.Compared(entry("a", 1, 10.0, 8.0), history_of([2.0, 1.5, 1.0, 0.5], 2.0, 8, [0.2, 0.5]))
    two = compare.Compared(entry("b", 2, 6.0, 16.0), history_of([2.0, 1.0, 0.6, 0.4], 1.0, 16, [0.3, 0.6]))
    loss = compare.Quantity.TRAIN_LOSS
    assert compare.curve(two.history, loss, compare.XAxis.STEP).x == [1, 2, 3, 4]
    assert compare.curve(two.history, loss, compare.XAxis.SAMPLES).x == [16, 32, 48, 64]
    assert compare.curve(two.history, loss, compare.XAxis.WALL) == compare.Curve([1.0, 2.0, 3.0, 4.0],
                                                                                 [2.0, 1.0, 0.6, 0.4])
    # Train loss is smoothed like TensorBoard (debiased EMA 0.6) before thresholds: one lucky step is no arrival.
    assert compare.smoothed([2.0, 1.0]) == pytest.approx([2.0, (0.6 * 0.4 * 2.0 + 0.4 * 1.0) / (1 - 0.36)])
    assert compare.smoothed([2.0, 1.0, 0.6, 0.4])[-1] < 0.8
    assert compare.default_threshold([one, two], loss) == pytest.approx(
        max(compare.smoothed([2.0, 1.5, 1.0, 0.5])[-1], compare.smoothed([2.0, 1.0, 0.6, 0.4])[-1]))
    spiky = history_of([2.0, 0.1, 2.0, 2.0, 2.0], 1.0, 8)  # one lucky batch at 2 s
    assert compare.time_to_threshold(spiky.track("global_loss"), 0.5, False) == 2.0
    assert compare.time_to_threshold(spiky.track("global_loss"), 0.5, False, compare.SMOOTHING) is None
    table = compare.summarize([one, two], loss, 1.4)
    assert [r.time_to_threshold_s for r in table] == [6.0, 2.0]  # smoothed: 1.34 at 6 s, 1.375 at 2 s
    assert [r.speedup for r in table] == [1.0, 3.0] and table[1].speedup_basis == "time to threshold"
    assert (table[1].final, table[1].best, table[1].duration_s) == (0.4, 0.4, 6.0)
    acc = compare.summarize([one, two], compare.Quantity.EVAL_ACCURACY, 0.5)
    assert [r.time_to_threshold_s for r in acc] == [4.0, 2.0] and acc[1].best == 0.6
    never = compare.summarize([one, two], loss, 0.1)  # nobody got there: speedup from samples/s
    assert [r.time_to_threshold_s for r in never] == [None, None] and never[1].speedup == 2.0
    assert "1 rank," in one.label and "2 ranks" in two.label and "batch 8/rank" in two.label


def test_final_loss_and_best_eval_prefer_accuracy():
    h = history_of([2.0, 1.0], 1.0, 8, [0.4, 0.7])
    assert final_loss(h) == 1.0
    assert best_eval(h) == BestEval("eval_top1", 0.7)
    h.tracks.pop(("eval_top1", None))
    assert best_eval(h) == BestEval("eval_loss", pytest.approx(0.3))


def test_csv_export_reads_back_with_the_csv_module(tmp_path):
    h = history_of([2.0, 1.0], 0.5, 8)
    h.add(["cpu_pct", 1, None, 0.25, 97.5])
    assert export.write_csv(h, tmp_path / "run.csv") == 5
    with open(tmp_path / "run.csv", newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert [r["metric"] for r in table] == ["cpu_pct", "global_loss", "global_loss", "samples_per_s",
                                             "samples_per_s"]
    assert table[0]["key"] == "1" and table[0]["step"] == "" and float(table[0]["value"]) == 97.5
    assert float(table[2]["unix_time"]) == pytest.approx(T0 + 1.0) and float(table[2]["value"]) == 1.0


def test_tensorboard_export_reads_back_with_tensorboards_reader(tmp_path):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator",
        reason="TensorBoard is not installed (optional group 'tensorboard': pip install 'ddpstudio[tensorboard]')")
    h = history_of([2.0, 1.0, 0.5], 0.5, 8, [0.25])
    h.add(["loss", 1, 3, 1.4, 0.75])
    h.add(["gpu_util", 0, None, 0.9, 55.0])
    assert export.write_tensorboard(h, tmp_path / "tb") == 10
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == {"train/loss", "train/samples_per_s", "train/loss/rank1", "eval/top1",
                                          "eval/loss", "load/gpu_util/gpu0"}
    loss = acc.Scalars("train/loss")
    assert [(s.step, s.value) for s in loss] == [(1, 2.0), (2, 1.0), (3, 0.5)]
    assert [s.wall_time for s in loss] == pytest.approx([T0 + 0.5, T0 + 1.0, T0 + 1.5])
    assert acc.Scalars("train/loss/rank1")[0].value == 0.75


def test_tensorboard_missing_names_the_optional_group(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("tensorboard"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    words = r"optional 'tensorboard' dependencies.*ddpstudio\[tensorboard\]"
    with pytest.raises(export.MissingTensorBoard, match=words):
        export.write_tensorboard(history_of([1.0], 1.0, 8), tmp_path / "tb")
    assert not (tmp_path / "tb").exists()
