"""scripts/cpu_census.py charges a child process's CPU to the test that started it, and a test's own CPU too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_child_process_and_the_tests_own_work_are_charged_to_that_test(tmp_path):
    # Each spends 0.3 s of its own CPU, however fast the machine (a fixed loop took 0.1 s on a fast one).
    spend = ("import time\nstart = time.process_time()\n"
             "while time.process_time() - start < 0.3: sum(i * i for i in range(10_000))\n")
    (tmp_path / "test_spend.py").write_text(
        "import subprocess, sys\n"
        f"SPEND = {spend!r}\n"
        "def test_starts_a_child():\n"
        "    subprocess.run([sys.executable, '-c', SPEND], check=True)\n"
        "def test_works_itself():\n"
        "    exec(SPEND, {})\n", encoding="utf-8")
    out = tmp_path / "census"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "cpu_census.py"), "--out", str(out), "--",
                           "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path / "test_spend.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in proc.stdout.splitlines()
            if "::test_" in line}
    child = rows["test_spend.py::test_starts_a_child"]
    own = rows["test_spend.py::test_works_itself"]
    # | test | CPU s | in pytest s | reaped s | torch imports | what it starts |
    assert float(child[1]) >= 0.25 and float(child[2]) < float(child[1]) and "-c x1" in child[5], child
    assert float(child[3]) >= float(child[1]) - float(child[2]) - 0.05, child  # the child, reaped by pytest
    assert float(own[1]) >= 0.25 and float(own[2]) == float(own[1]) and own[5].strip(" |") == "", own
    assert float(own[3]) < 0.05, own  # it started nothing
