"""How long finding and cleaning leftovers takes: scan() then clean() over N stale runs.

    .venv/bin/python benchmarks/cleanup.py [--sizes 10,100,1000] [--orphans 2] [--repeats 3] [--json out.json]

Each size gets a fresh DDP Studio home holding N registry records of killed
runs (their launchers and ranks gone), each with a stale store file: half at
a fixed path outside our folders, half in our store folder. ``--orphans`` real
sleeping processes are recorded as surviving ranks, so clean() also stops
process trees (their polite SIGTERM is honoured at once). Measured: scan()
(the median of ``--repeats`` read-only scans), clean(findings) (one run: its
own re-scan, the kills, the deletes, the record updates), and their sum,
which the target (< 2 s for 100) is about. The run checks that everything
was cleaned. The machine's process count matters (the lock-holder sweep
reads every process's open files): it is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

DEAD_PID = 2**22 + 7  # above Linux's largest pid_max: never a live process
TARGET_S = 2.0


def populate(home: Path, n: int, orphans: int) -> list[subprocess.Popen]:
    from ddpstudio.core import paths
    from ddpstudio.core.cleanup import registry
    from ddpstudio.core.process.proctable import create_time

    fixed = home / "fixed"
    fixed.mkdir()
    paths.store_dir().mkdir(parents=True)
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
                for _ in range(orphans)]
    now = time.time()  # a store written long after its run started and ended would not count as ours
    for i in range(n):
        run_id = f"run-{i:05d}"
        store = (fixed / f"pg{i}") if i % 2 else (paths.store_dir() / f"{run_id}.store")
        store.write_bytes(b"\x09\x00\x00\x00refcount/\x01\x00\x00\x00\x31" * 8)
        ranks = [registry.RankRecord(r, DEAD_PID + 1 + r, 1000.0 + i) for r in range(2)]
        if i < orphans:
            ranks[0] = registry.RankRecord(0, sleepers[i].pid, create_time(sleepers[i].pid))
        registry.record_start(run_id, run_dir=str(paths.runs_dir() / run_id), launcher_pid=DEAD_PID,
                              launcher_create_time=1000.0 + i, ranks=ranks, store_path=str(store),
                              store_is_fixed=bool(i % 2), started=now)
    return sleepers


def measure(n: int, orphans: int, repeats: int) -> dict:
    from ddpstudio.core.cleanup import hygiene

    home = Path(tempfile.mkdtemp(prefix="ddpstudio-cleanup-bench-"))
    os.environ["DDPSTUDIO_HOME"] = str(home)
    sleepers = populate(home, n, min(orphans, n))
    try:
        scans = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            findings = hygiene.scan()
            scans.append(time.perf_counter() - t0)
        assert len(findings.stale_stores) == n, len(findings.stale_stores)
        assert len(findings.orphans) == min(orphans, n), findings.orphans
        t0 = time.perf_counter()
        report = hygiene.clean(findings)
        clean_s = time.perf_counter() - t0
        assert len(report.deleted) == n and not report.left, report.summary()
        assert len(report.killed) == min(orphans, n)
        assert hygiene.scan().empty
        scan_s = statistics.median(scans)
        return {"records": n, "files": n, "orphans": len(report.killed), "scan_s": scan_s, "clean_s": clean_s,
                "total_s": scan_s + clean_s}
    finally:
        for proc in sleepers:
            proc.kill()
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="comma-separated record counts")
    parser.add_argument("--orphans", type=int, default=2, help="real processes recorded as surviving ranks")
    parser.add_argument("--repeats", type=int, default=3, help="scans per size (the median is reported)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(f"{len(psutil.pids())} processes on this machine, {os.cpu_count()} CPUs")
    print(f"{'records':>8} {'files':>6} {'orphans':>8} {'scan s':>8} {'clean s':>8} {'total s':>8}")
    rows = []
    for n in sizes:
        row = measure(n, args.orphans, args.repeats)
        rows.append(row)
        mark = "" if n != 100 else ("  < 2 s target: met" if row["total_s"] < TARGET_S else "  < 2 s target: MISSED")
        print(f"{row['records']:>8} {row['files']:>6} {row['orphans']:>8} {row['scan_s']:>8.3f} "
              f"{row['clean_s']:>8.3f} {row['total_s']:>8.3f}{mark}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
