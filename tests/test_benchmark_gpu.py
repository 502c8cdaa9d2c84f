"""benchmarks/gpu.py in its reduced CPU form: it runs every part for real and prints one table whose every
ratio is a number (the figures themselves are the benchmark's business, never asserted here)."""

from __future__ import annotations

import json
import math
import os
import subprocess

import psutil
import pytest
import torch

from tests.conftest import PYTHON, REPO, killed_after

# Each part's rows in the CPU form: (part column, text in the "what" column).
ROWS = {"ceiling": [("recipe / ceiling", "resnet18 32 px")],
        "launch": [("studio / torchrun", "with the rank helper"), ("studio / torchrun", "--no-rank-helper")],
        "exchange": [("exchange / native", ", staged"), ("exchange / native", ", staged + fp16"),
                     ("exchange / native", ", torch allreduce_hook"),
                     ("exchange / native", ", staged, blocking copies (before)")]}  # benchmarks/staged_before.py


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Each run of lines starting with ``|``, as rows of cells (the separator row left out)."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if current is None:
                current = []
                tables.append(current)
            if not all(set(c) <= {"-"} for c in cells):
                current.append(cells)
        else:
            current = None
    return tables


@pytest.mark.slow
@pytest.mark.parametrize("part", list(ROWS))
def test_the_cpu_form_prints_one_table_with_a_number_for_every_ratio(part, tmp_path):
    """One part per test (``--parts``), so that each stays within its deadline on a busy 2-core machine;
    without ``--parts`` the script runs all three into the same table."""
    out = tmp_path / "gpu.json"
    proc = subprocess.Popen([PYTHON, str(REPO / "benchmarks" / "gpu.py"), "--cpu", "--parts", part, "--json", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    with killed_after(proc, what=f"benchmarks/gpu.py --cpu --parts {part}"):
        stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]

    tables = markdown_tables(stdout)
    assert len(tables) == 1, stdout
    header, *rows = tables[0]
    assert header == ["part", "what", "measured", "against", "ratio", "note"]
    assert len(rows) == len(ROWS[part]), rows
    for row, (name, what) in zip(rows, ROWS[part]):
        assert row[0] == name and what in row[1], row
        ratio = float(row[4])  # "failed" or an empty cell would raise here
        assert math.isfinite(ratio) and ratio > 0, row
        if part == "exchange":
            assert "bit-identical to native" in row[5] or "differ from native by up to" in row[5], row

    device = next(line for line in stdout.splitlines() if line.startswith("Device: "))
    assert "CPU only" in device and f"torch {torch.__version__}" in device and "driver" in device
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["device"] == "cpu" and data["machine"] == device
    assert [round(r["ratio"], 3) for r in data["rows"]] == [float(row[4]) for row in rows]
    assert not psutil.Process().children(recursive=True)
