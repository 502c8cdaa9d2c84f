"""The hang watch's own cost per step (``--hang-timeout``, issue 25 §3): steps/s with the watch off and on.

    .venv/bin/python benchmarks/hangwatch.py [--steps 400] [--warmup 20] [--rounds 5] [--json hangwatch.json]

Each round runs the built-in ``mlp`` (8 px, batch 16, two Gloo ranks on the CPU, no DataLoader workers)
twice, ``--hang-timeout 0`` (not watched: no heartbeat thread, no phase marks, the launcher reads no beats)
and the default (45 s: phases marked every step, a beat every 4.5 s), the order alternating between rounds
so that drift on a shared machine hits both. A tiny model is the worst case: its steps are short, so a fixed
cost per step weighs most. Steps/s come from rank 0's step stamps after ``--warmup`` steps
(core/bench/timing.py).

The recipe marks its phases whether the watch is on or off (off, its ``Heartbeat`` is never started), so
the two differ only by the beat thread and the launcher reading its beats. What every step pays either way,
``Heartbeat.mark`` (3 x ``--accumulate`` + 2 calls a step: data, forward, backward per micro-batch, then
optimizer and exchange), is timed on its own too (``timeit``, this process): a figure a busy machine cannot
drown, as it drowns the steps/s of two ranks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ddpstudio.core import protocol  # noqa: E402
from ddpstudio.core.bench.timing import StepSummary, measured_step_times, rank0_step_stamps  # noqa: E402
from ddpstudio.core.plan import Plan  # noqa: E402
from ddpstudio.rank.heartbeat import Heartbeat  # noqa: E402
from rounds import machine_load, rotate, save  # noqa: E402

WATCH = {"off": 0.0, "on": Plan.hang_timeout}  # --hang-timeout: 0 turns the watch off
MARKS_PER_STEP = 5  # rank/recipe.py without accumulation: data, forward, backward, optimizer, exchange


def mark_seconds(calls: int = 1_000_000) -> float:
    """Seconds per ``Heartbeat.mark`` call, the best of five timings."""
    beat = Heartbeat()
    return min(timeit.repeat(lambda: beat.mark("forward", 7), number=calls, repeat=5)) / calls


def run(kind: str, args: argparse.Namespace, home: Path) -> float:
    """One ``ddpstudio run``: rank 0's steps per second after the warm-up."""
    argv = [sys.executable, "-m", "ddpstudio", "run", "--json", "--model", "mlp", "--image-size", "8",
            "--batch-size", "16", "--workers", "0", "--world-size", "2", "--epochs", "100", "--max-steps",
            str(args.steps), "--hang-timeout", f"{WATCH[kind]:g}"]
    env = {**os.environ, "DDPSTUDIO_HOME": str(home)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"watch {kind}: exit {done.returncode}\n{done.stderr[-2000:]}")
    parser = protocol.EventParser()
    evs = [ev for line in done.stdout.splitlines() for ev in parser.feed(line)]
    return StepSummary.of(measured_step_times(rank0_step_stamps(evs), args.warmup)).steps_per_s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ddpstudio-hangwatch-") as home:
        rounds, load = rotate(tuple(WATCH), args.rounds, lambda kind: run(kind, args, Path(home)))
    print(f"mlp 8 px, batch 16 per rank, 2 Gloo ranks on the CPU, {args.steps} steps ({args.warmup} warm-up); "
          f"{machine_load(load)}\n")
    print("| round | watch off (steps/s) | watch on, 45 s (steps/s) | on / off |")
    print("|---|---|---|---|")
    ratios = []
    for i, r in enumerate(rounds, 1):
        ratios.append(r["on"] / r["off"])
        print(f"| {i} | {r['off']:.1f} | {r['on']:.1f} | {ratios[-1]:.3f} |")
    print(f"| median | {statistics.median(r['off'] for r in rounds):.1f} | "
          f"{statistics.median(r['on'] for r in rounds):.1f} | {statistics.median(ratios):.3f} "
          f"({min(ratios):.3f} to {max(ratios):.3f}) |")
    mark = mark_seconds()
    step = 1.0 / statistics.median(r["off"] for r in rounds)
    print(f"\nHeartbeat.mark: {mark * 1e9:.0f} ns a call, {MARKS_PER_STEP} a step: "
          f"{MARKS_PER_STEP * mark * 1e6:.2f} us "
          f"a step, {MARKS_PER_STEP * mark / step:.4%} of the median step ({step * 1e3:.1f} ms)")
    save(args.json, args, load, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
