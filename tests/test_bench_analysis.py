"""The benchmark's arithmetic and words: speedup, efficiency, epoch time, verdict, exports (no processes)."""

from __future__ import annotations

import csv

import pytest
from PIL import Image

from ddpstudio.core.bench import analysis
from ddpstudio.core.bench.export import format_table, write_csv, write_png
from ddpstudio.core.bench.model import BenchResult, BenchRow
from ddpstudio.core.bench.timing import measured_step_times, throughput


def row(ws: int, sps: float | None, variant: str = "gloo, FileStore, per-rank batch", **kw) -> BenchRow:
    kw.setdefault("per_rank_batch", 32)
    return BenchRow(variant=variant, world_size=ws, backend="gloo", store="file", batch_mode="per-rank",
                    effective_batch=32 * ws, warmup=2, steps=5, samples_per_s=sps, **kw)


def filled(*rows: BenchRow, **kw) -> list[BenchRow]:
    rows = list(rows)
    analysis.fill_derived(rows, **kw)
    return rows


def test_step_times_skip_warmup_and_give_throughput():
    stamps = [(1, 10.0), (2, 10.9), (3, 11.4), (4, 11.9), (5, 12.5)]
    times = measured_step_times(stamps, warmup=2)
    assert times == pytest.approx([0.5, 0.5, 0.6])
    assert throughput(times, 64) == pytest.approx(64 * 3 / 1.6)
    # a script reporting every 10 steps: each gap spans 10 steps
    assert measured_step_times([(10, 0.0), (20, 2.0), (30, 4.0)], 1) == pytest.approx([0.2, 0.2])
    with pytest.raises(ValueError):
        measured_step_times(stamps, warmup=0)


def test_speedup_and_efficiency_against_the_smallest_world_size():
    rows = filled(row(1, 100.0), row(2, 185.0), row(4, 310.0))
    assert [r.speedup for r in rows] == pytest.approx([1.0, 1.85, 3.1])
    assert [r.efficiency for r in rows] == pytest.approx([1.0, 0.925, 0.775])
    rows = filled(row(2, 200.0), row(4, 300.0))  # no 1-rank run: 2 ranks are the baseline
    assert rows[1].speedup == pytest.approx(1.5) and rows[1].efficiency == pytest.approx(0.75)


def test_the_blogs_windows_table_reads_as_it_does_in_the_blog():
    # 58m55s, 31m55s, 19m03s for the same epoch: throughput is the inverse of the time
    times = [58 * 60 + 55, 31 * 60 + 55, 19 * 60 + 3]
    rows = filled(*(row(ws, 1e6 / t) for ws, t in zip((1, 2, 4), times)))
    assert rows[1].efficiency == pytest.approx(0.92, abs=0.005)
    assert rows[2].efficiency == pytest.approx(0.77, abs=0.005)
    text = analysis.verdict(rows, device="cuda")
    assert "2 GPUs give 1.85x (92% efficient); 4 GPUs give 3.09x (77% efficient)" in text
    assert "the extra GPUs pay off" in text


def test_epoch_time_from_steps_per_epoch_or_a_given_epoch_size():
    r = row(2, 128.0, step_time_s=0.5, steps_per_epoch=100)
    assert analysis.epoch_time(r) == pytest.approx(50.0)
    assert analysis.epoch_time(r, samples_per_epoch=1280) == pytest.approx(10.0)
    assert analysis.format_duration(58 * 60 + 55) == "58m 55s"
    assert analysis.format_duration(3725) == "1h 02m 05s"


def test_verdict_for_poor_scaling():
    text = analysis.verdict(filled(row(1, 100.0), row(2, 110.0)), device="cuda")
    assert "2 GPUs give 1.10x (55% efficient)" in text and "pay off only in part" in text
    text = analysis.verdict(filled(row(1, 100.0), row(2, 80.0)), device="cuda")
    assert "slower than 1" in text and "stay at 1" in text
    text = analysis.verdict(filled(row(1, 100.0), row(2, 90.0), row(4, 30.0)), device="cuda")
    assert "more GPUs are slower than 1" in text
    text = analysis.verdict(filled(row(1, 100.0), row(2, 180.0), row(4, 150.0)), device="cuda")
    assert "2 GPUs are the sweet spot" in text
    text = analysis.verdict(filled(row(1, 100.0), row(4, 160.0)), device="cuda")
    assert "do not pay off" in text


def test_verdict_for_a_data_loader_bound_run():
    rows = filled(row(1, 100.0, data_wait_fraction=0.05), row(2, 120.0, data_wait_fraction=0.45))
    text = analysis.verdict(rows, device="cuda", workers=0)
    assert text.startswith("The data loader is the bottleneck")
    assert "45%" in text and "raise DataLoader workers (now 0)" in text


def test_verdict_notes_idle_gpus_shared_cores_and_failures():
    rows = filled(row(1, 100.0, gpu_util_pct=40.0), row(2, 190.0, gpu_util_pct=35.0))
    assert "busy only 35%" in analysis.verdict(rows, device="cuda")
    rows = filled(row(1, 100.0), row(4, 120.0))
    assert "share 2 cores" in analysis.verdict(rows, device="cpu", cpu_cores=2)
    rows = filled(row(1, 100.0), row(2, None, state="failed", error="out of memory"))
    text = analysis.verdict(rows)
    assert text.startswith("Only 1 rank measured") and "out of memory" in text


def test_default_and_parsed_world_sizes():
    assert analysis.default_world_sizes(0, cpu_mode=True) == [1, 2]
    assert analysis.default_world_sizes(4, cpu_mode=False) == [1, 2, 4]
    assert analysis.default_world_sizes(6, cpu_mode=False) == [1, 2, 4, 6]
    assert analysis.parse_world_sizes("4, 1,2,2") == [1, 2, 4]
    for bad in ("", "0,1", "one"):
        with pytest.raises(ValueError):
            analysis.parse_world_sizes(bad)


def test_exports_csv_png_and_round_trip(tmp_path):
    rows = filled(row(1, 100.0, step_times=[0.32, 0.33]), row(2, 185.0, step_times=[0.35, 0.34]),
                  row(1, 99.0, variant="gloo, TCP store, per-rank batch"),
                  row(2, None, variant="gloo, TCP store, per-rank batch", state="failed"))
    result = BenchResult(rows=rows, verdict=analysis.verdict(rows), settings={"model": "resnet18"},
                         machine={"cpu_cores": 2})
    with open(write_csv(result, tmp_path / "b.csv"), newline="") as fh:
        lines = list(csv.DictReader(fh))
    assert [(r["world_size"], r["speedup"][:4]) for r in lines] == [("1", "1.0"), ("2", "1.85"), ("1", "1.0"),
                                                                    ("2", "")]
    assert lines[1]["step_times_s"] == "0.350000 0.340000"
    png = write_png(result, tmp_path / "b.png")
    with Image.open(png) as img:
        assert img.size == (1000, 620)
        assert len(img.convert("RGB").getcolors(1 << 20)) > 20  # drawn, not blank
    again = BenchResult.from_dict(result.to_dict())
    assert again.rows == result.rows and again.variants == result.variants
    table = format_table(again)
    assert "1.85x" in table and "failed" in table and "gloo, TCP store" in table


def test_the_verdict_rests_on_what_was_measured_and_says_what_it_cannot_tell():
    # Issue 24: on a contended 2-core CPU machine "49% lost to communication" blamed what was never timed.
    rows = filled(row(1, 100.0, step_time_s=0.080), row(2, 102.0, step_time_s=0.157))
    text = analysis.verdict(rows, device="cpu", cpu_cores=2)
    assert "lost to communication" not in text
    assert "a step took 157 ms at 2 ranks against 80 ms at 1" in text
    assert "competing for the same CPU cores" in text and "cannot tell apart" in text
