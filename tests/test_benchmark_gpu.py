"""benchmarks/gpu.py in its reduced CPU form: it runs every part for real and prints one table whose every
ratio is a number (the figures themselves are the benchmark's business, never asserted here).

One call of the script measures the parts the selected tests name (``--parts``), and each part's test
reads that call: a call starts torch and the NVML inventory once, not once per part. Each test still
has its own deadline, for its own part only: the script writes its JSON after every part (``write_json``
in ``main``), so a test waits for its part's rows there; the last part's test also waits for the end
and reads the printed table.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import torch

from tests.conftest import PROCESS_DEADLINE_S, PYTHON, REPO, assert_none_left
from tests.studio import kill_left

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


@dataclass
class Bench:
    """The one ``benchmarks/gpu.py --cpu`` call of this module: its process, its parts and its files."""

    proc: subprocess.Popen
    parts: list[str]
    json: Path
    stdout: Path
    stderr: Path

    def rows_of(self, part: str) -> list[dict] | None:
        """The JSON's rows of ``part`` once the script wrote them (None before; the file is rewritten whole
        after each part, so a read can catch it half written)."""
        try:
            rows = json.loads(self.json.read_text(encoding="utf-8"))["rows"]
        except (OSError, ValueError, KeyError):
            return None
        names = {name for name, _ in ROWS[part]}
        return [r for r in rows if r["part"] in names] or None

    def wait_for(self, part: str, deadline: float) -> list[dict]:
        """``part``'s rows; at ``deadline``, the process is killed and the test fails, saying so."""
        while time.monotonic() < deadline:
            rows = self.rows_of(part)
            if rows is not None:
                return rows
            if self.proc.poll() is not None:
                rows = self.rows_of(part)
                assert rows is not None, f"exit {self.proc.returncode} without the {part} rows: {self.errors()}"
                return rows
            time.sleep(0.2)
        kill_left([self.proc])
        pytest.fail(f"benchmarks/gpu.py --cpu had not measured the {part} part after {PROCESS_DEADLINE_S:g} s: killed")

    def errors(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")[-3000:]


@pytest.fixture(scope="module")
def bench(request, tmp_path_factory):
    """Starts the script for the parts of this module's selected tests (in the script's own order, which is
    this file's). Whatever a failure leaves is killed; none of its processes may be left."""
    parts = [p for p in ROWS if any(getattr(item, "callspec", None) and item.callspec.params.get("part") == p
                                    for item in request.session.items if item.module is request.module)]
    work = tmp_path_factory.mktemp("gpu-bench")
    home = work / "home"  # the script's and its children's: how what a failure leaves is found
    with open(work / "stdout.txt", "w") as out, open(work / "stderr.txt", "w") as err:  # files: no pipe fills up
        proc = subprocess.Popen([PYTHON, str(REPO / "benchmarks" / "gpu.py"), "--cpu", "--parts", ",".join(parts),
                                 # A budget of 0 s: the first round runs, the second is left out (and said so).
                                 "--rounds", "2", "--budget", "0", "--json", str(work / "gpu.json")], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONPATH": str(REPO), "DDPSTUDIO_HOME": str(home)})
    yield Bench(proc, parts, work / "gpu.json", work / "stdout.txt", work / "stderr.txt")
    kill_left([proc])
    assert_none_left(home, grace_s=0)  # the script waits for its children: any still running is left over


@pytest.mark.slow
@pytest.mark.parametrize("part", list(ROWS))
def test_the_cpu_form_prints_one_table_with_a_number_for_every_ratio(part, bench):
    """Each part's rows as soon as the script measured them; after the last part, the table it printed."""
    deadline = time.monotonic() + PROCESS_DEADLINE_S
    got = bench.wait_for(part, deadline)
    assert len(got) == len(ROWS[part]), got
    for row, (name, what) in zip(got, ROWS[part]):
        assert row["part"] == name and what in row["what"], row
        assert row["ratio"] is not None and math.isfinite(row["ratio"]) and row["ratio"] > 0, row  # None: "failed"
        if part == "exchange":
            assert "bit-identical to native" in row["note"] or "differ from native by up to" in row["note"], row
        else:
            order = "alternating" if part == "ceiling" else "rotating"
            assert f"1 {order} round (of 2: the next did not fit the 0 s budget); pairs " in row["note"], row
    if part != bench.parts[-1]:
        return

    try:
        bench.proc.wait(max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        kill_left([bench.proc])
        pytest.fail(f"benchmarks/gpu.py --cpu was still running {PROCESS_DEADLINE_S:g} s after this test began: killed")
    stdout = bench.stdout.read_text(encoding="utf-8")
    assert bench.proc.returncode == 0, bench.errors()

    tables = markdown_tables(stdout)
    assert len(tables) == 1, stdout
    header, *rows = tables[0]
    assert header == ["part", "what", "measured", "against", "ratio", "note"]
    expected = [row for p in bench.parts for row in ROWS[p]]
    assert len(rows) == len(expected), rows
    for row, (name, what) in zip(rows, expected):
        assert row[0] == name and what in row[1], row
        ratio = float(row[4])  # "failed" or an empty cell would raise here
        assert math.isfinite(ratio) and ratio > 0, row
        if name == "exchange / native":
            assert "bit-identical to native" in row[5] or "differ from native by up to" in row[5], row

    device = next(line for line in stdout.splitlines() if line.startswith("Device: "))
    assert "CPU only" in device and f"torch {torch.__version__}" in device and "driver" in device
    data = json.loads(bench.json.read_text(encoding="utf-8"))
    assert data["device"] == "cpu" and data["machine"] == device
    assert [round(r["ratio"], 3) for r in data["rows"]] == [float(row[4]) for row in rows]
    assert not psutil.Process().children(recursive=True)
