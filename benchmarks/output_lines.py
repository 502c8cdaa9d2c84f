"""The launcher's and the CLI's CPU per line a rank prints (issue 20): what reading output costs the ranks.

    .venv/bin/python benchmarks/output_lines.py [--lines 20000] [--ranks 1,2] [--rounds 3]
        [--tree DIR --tree DIR ...] [--json out.json]

A script that knows nothing of DDP Studio prints ``step {i} loss {x:.4f}``
``--lines`` times per rank as fast as it can (every line a log event, a
scraped step and, once the ranks' steps are averaged, a global step). It runs
two ways, 1 and 2 ranks, and again with one line (the fixed cost, subtracted;
one line, so that it ends the same way: a step trained):

* ``cli``: ``python -m ddpstudio run --script S --world-size R --dist-args ""
  -- N``, its text to a file (not a terminal), as a user redirects it;
* ``launcher``: ``python -m ddpstudio.core.launch.launcher PLAN.json`` alone,
  on a copy of that run's plan, its stream to a file.

Each process's own CPU (user + system, not its children's) is read from
``/proc`` once it has exited and before it is reaped (``os.waitid`` with
``WNOWAIT``; Linux and macOS), so the CLI's and the launcher's are separate.
``--tree`` (repeatable) runs each checkout's ``ddpstudio`` (first on
PYTHONPATH) in the same rounds, in rotating order: before and after a change
under the same load. Reported: medians over the rounds of microseconds of CPU
per printed line (all ranks' lines together) and of the ranks' own printing
rate (lines/s, as the script measured it), with the 1-minute load average.
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
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
# The user's script: prints as fast as it can, then writes its own lines/s (rank 0's) next to its output.
SPAM = '''import os, sys, time
n = int(sys.argv[1])
x, start = 2.5, time.perf_counter()
for i in range(n):
    x *= 0.9999
    print(f"step {i} loss {x:.4f}")
sys.stdout.flush()
rate_file = os.environ.get("SPAM_RATE_FILE")
if rate_file and os.environ.get("RANK", "0") == "0" and n:
    with open(rate_file, "w") as f:
        f.write(str(n / (time.perf_counter() - start)))
'''


@dataclass(frozen=True)
class Spent:
    """One process's own CPU seconds, the wall seconds it ran, and the script's lines/s (None without lines)."""

    cpu_s: float
    wall_s: float
    lines_per_s: float | None


def own_cpu(proc: subprocess.Popen, timeout: float) -> tuple[float, float]:
    """(own user+system CPU seconds, wall seconds) of a child, read after it exits, before it is reaped."""
    t0 = time.monotonic()
    try:
        if hasattr(os, "waitid"):
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # a zombie: its /proc/PID/stat stays
            times = psutil.Process(proc.pid).cpu_times()
        else:  # Windows: the last reading while it runs (misses its final moments)
            ps, times = psutil.Process(proc.pid), None
            while proc.poll() is None:
                times = ps.cpu_times()
                time.sleep(0.02)
        proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode not in (0, 5):  # 5: "not a distributed script", as this one is with 2 ranks
        raise RuntimeError(f"{proc.args} exited {proc.returncode}")
    return times.user + times.system, time.monotonic() - t0


def tree_env(tree: Path, home: Path, rate_file: Path) -> dict[str, str]:
    env = dict(os.environ, DDPSTUDIO_HOME=str(home), SPAM_RATE_FILE=str(rate_file))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    return env


def read_rate(rate_file: Path) -> float | None:
    try:
        return float(rate_file.read_text())
    except (OSError, ValueError):
        return None
    finally:
        rate_file.unlink(missing_ok=True)


def run_cli(tree: Path, script: Path, ranks: int, lines: int, work: Path, timeout: float) -> tuple[Spent, Path]:
    """The CLI's own CPU for one run, and the run's plan.json."""
    rate_file = work / "rate.txt"
    out = work / f"cli-{uuid.uuid4().hex[:8]}.txt"
    cmd = [sys.executable, "-m", "ddpstudio", "run", "--script", str(script), "--world-size", str(ranks),
           "--dist-args", "", "--", str(lines)]
    with open(out, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=tree_env(tree, work / "home", rate_file))
        cpu, wall = own_cpu(proc, timeout)
    text = out.read_text(encoding="utf-8")
    out.unlink()
    folder = next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("  run folder: "))
    return Spent(cpu, wall, read_rate(rate_file)), Path(folder) / "plan.json"


def run_launcher(tree: Path, plan_path: Path, work: Path, timeout: float) -> Spent:
    """The launcher alone on a copy of a CLI run's plan (a fresh run id, folder and store)."""
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    run_id = "lines-" + uuid.uuid4().hex[:8]
    runs = Path(plan["run_dir"]).parent
    plan.update(run_id=run_id, run_dir=str(runs / run_id))
    if plan.get("store_path"):
        plan["store_path"] = str(Path(plan["store_path"]).with_name(run_id + ".store"))
        plan["init_method"] = "file://" + plan["store_path"]
    copy = work / f"{run_id}.json"
    copy.write_text(json.dumps(plan), encoding="utf-8")
    rate_file = work / "rate.txt"
    with open(os.devnull, "w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "ddpstudio.core.launch.launcher", str(copy)], stdout=sink,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                env=tree_env(tree, work / "home", rate_file))
        cpu, wall = own_cpu(proc, timeout)
    copy.unlink()
    return Spent(cpu, wall, read_rate(rate_file))


def per_line(full: Spent, empty: Spent, lines: int) -> float:
    return (full.cpu_s - empty.cpu_s) / lines * 1e6


def measure(trees: list[Path], ranks: list[int], args: argparse.Namespace, work: Path) -> dict:
    """(tree, ranks) -> {"cli_us", "launcher_us", "cli_rate", "launcher_rate", "load"}: lists over rounds."""
    script = work / "spam.py"
    script.write_text(SPAM, encoding="utf-8")
    found: dict = {(t, r): {"cli_us": [], "launcher_us": [], "cli_rate": [], "launcher_rate": [], "load": []}
                   for t in trees for r in ranks}
    for rnd in range(args.rounds):
        order = trees[rnd % len(trees):] + trees[:rnd % len(trees)]  # rotate: no tree always goes first
        for tree in order:
            for n in ranks:
                got = found[(tree, n)]
                lines = (args.lines - 1) * n  # more than the baseline run printed
                got["load"].append(os.getloadavg()[0])
                (cli, plan), (cli0, plan0) = (run_cli(tree, script, n, k, work, args.timeout)
                                              for k in (args.lines, 1))
                launcher, launcher0 = (run_launcher(tree, p, work, args.timeout) for p in (plan, plan0))
                got["cli_us"].append(per_line(cli, cli0, lines))
                got["launcher_us"].append(per_line(launcher, launcher0, lines))
                got["cli_rate"].append(cli.lines_per_s)
                got["launcher_rate"].append(launcher.lines_per_s)
                print(f"[{rnd + 1}/{args.rounds}] {tree} {n} rank(s): CLI {got['cli_us'][-1]:.1f} us/line, "
                      f"launcher {got['launcher_us'][-1]:.1f} us/line (load {got['load'][-1]:.1f})",
                      file=sys.stderr, flush=True)
    return found


def _median(values: list) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def table(found: dict, trees: list[Path], lines: int) -> str:
    rows = [f"| tree | ranks | CLI us/line | launcher us/line | lines/s per rank (CLI run) | "
            f"lines/s per rank (launcher run) | load |", "|---|---|---|---|---|---|---|"]
    for (tree, n), got in found.items():
        spread = lambda key: f"{_median(got[key]):.1f} ({min(got[key]):.1f}-{max(got[key]):.1f})"  # noqa: E731
        rows.append(f"| {tree.name if len(trees) > 1 else tree} | {n} | {spread('cli_us')} | "
                    f"{spread('launcher_us')} | {_median(got['cli_rate']):,.0f} | "
                    f"{_median(got['launcher_rate']):,.0f} | {min(got['load']):.1f}-{max(got['load']):.1f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=20000, help="lines each rank prints (default 20000)")
    p.add_argument("--ranks", default="1,2", help="world sizes to run (default 1,2)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tree", action="append", type=Path, metavar="DIR",
                   help="a checkout whose ddpstudio runs (repeatable; default this one)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per process before it is killed")
    p.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    args = p.parse_args(argv)
    trees = [t.resolve() for t in args.tree] if args.tree else [REPO]
    ranks = [int(r) for r in args.ranks.split(",") if r]
    work = Path(tempfile.mkdtemp(prefix="ddpstudio-lines-"))
    try:
        found = measure(trees, ranks, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.lines} lines per rank, {args.rounds} rotating rounds, medians (min-max); CPU per line over all "
          f"ranks' lines, a run of one line subtracted; {os.cpu_count()} CPUs\n")
    print(table(found, trees, args.lines))
    if args.json:
        Path(args.json).write_text(json.dumps([{"tree": str(t), "ranks": n, **got} for (t, n), got in found.items()],
                                              indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
