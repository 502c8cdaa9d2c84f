"""``ddpstudio bench`` on the CPU at 1 and 2 ranks: real launches, real Gloo process groups."""

from __future__ import annotations

import csv
import json

import pytest
from PIL import Image

from ddpstudio.cli.main import main
from ddpstudio.core.bench import BenchResult
from ddpstudio.core.bench.export import format_table


@pytest.mark.slow
def test_cli_bench_on_the_cpu_writes_table_csv_and_png(tmp_path, capsys):
    csv_path, png_path = tmp_path / "bench.csv", tmp_path / "bench.png"
    code = main(["bench", "--world-sizes", "1,2", "--steps", "6", "--warmup", "2", "--batch-size", "8",
                 "--model", "mlp", "--image-size", "8", "--json", "--csv", str(csv_path), "--png", str(png_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    rows = result["rows"]
    assert [r["world_size"] for r in rows] == [1, 2]
    assert all(r["state"] == "ok" and r["steps"] == 6 and len(r["step_times"]) == 6 for r in rows)

    # every figure follows from the raw per-step timings the benchmark recorded
    sps = [r["effective_batch"] * len(r["step_times"]) / sum(r["step_times"]) for r in rows]
    assert [r["effective_batch"] for r in rows] == [8, 16]
    assert [r["samples_per_s"] for r in rows] == pytest.approx(sps)
    assert rows[0]["speedup"] == pytest.approx(1.0)
    assert rows[1]["speedup"] == pytest.approx(sps[1] / sps[0])
    assert rows[1]["efficiency"] == pytest.approx(sps[1] / sps[0] / 2)
    for r in rows:
        assert r["time_to_first_step_s"] > 0 and r["steps_per_epoch"] and r["epoch_time_s"] > 0
        assert r["step_time_s"] == pytest.approx(sum(r["step_times"]) / 6)
    assert "2 ranks give" in result["verdict"] and result["machine"]["device"] == "cpu"

    with open(csv_path, newline="") as fh:
        lines = list(csv.DictReader(fh))
    assert [int(line["world_size"]) for line in lines] == [1, 2]
    assert float(lines[1]["speedup"]) == pytest.approx(rows[1]["speedup"])
    assert len(lines[1]["step_times_s"].split()) == 6
    with Image.open(png_path) as img:
        assert img.format == "PNG" and img.size == (1000, 620)
        assert len(img.convert("RGB").getcolors(1 << 20)) > 20  # a drawn chart, not a blank canvas

    table = format_table(BenchResult.from_dict(result))
    assert "samples/s" in table and f"{rows[1]['speedup']:.2f}x" in table


def test_cli_bench_refuses_run_only_options(capsys):
    assert main(["bench", "--world-size", "2"]) == 2
    assert "use --world-sizes" in capsys.readouterr().err
    assert main(["bench", "--steps", "0", "--world-sizes", "1"]) == 2
    assert "at least 1 step" in capsys.readouterr().err
