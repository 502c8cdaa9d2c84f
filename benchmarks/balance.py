"""Balanced against equal batches with one rank deliberately slowed, and the ideal (issue 25 §1).

    .venv/bin/python benchmarks/balance.py [--model resnet18] [--batch-size 32] [--slow 0.01] [--steps 25]
        [--warmup 5] [--rounds 1] [--json balance.json]

Rank 1 sleeps ``--slow`` seconds per sample of each forward/backward (``DDPSTUDIO_SLOW_RANK``, the
seam in rank/balance.py), a stand-in for a slower GPU beside a fast one. Each round runs, in turn:

* ``solo fast`` and ``solo slow``: one rank alone (no exchange) at ``--batch-size``, the slow one slowed:
  each kind of rank's own samples/s. Their sum is the ideal for two ranks;
* ``equal``: two ranks, ``--balance equal``, ``--batch-size`` each (the fast rank waits every step);
* ``balanced``: two ranks, ``--balance measured``, the same global batch shared by measured speed.

Samples/s come from rank 0's step stamps after ``--warmup`` steps (core/bench/timing.py); the table gives
each round's figures and the ratios balanced / ideal and balanced / equal (medians over the rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ddpstudio.core import protocol  # noqa: E402
from ddpstudio.core.bench.timing import measured_step_times, rank0_step_stamps, throughput  # noqa: E402
from ddpstudio.rank.balance import SLOW_ENV  # noqa: E402

KINDS = ("solo fast", "solo slow", "equal", "balanced")


def run(kind: str, args: argparse.Namespace, home: Path) -> dict:
    """One ``ddpstudio run``; its samples/s and, balanced, the batches it chose."""
    world = 1 if kind.startswith("solo") else 2
    slow = f"{0 if kind == 'solo slow' else 1}:{args.slow}" if kind != "solo fast" else ""
    argv = [sys.executable, "-m", "ddpstudio", "run", "--json", "--model", args.model, "--image-size",
            str(args.image_size), "--batch-size", str(args.batch_size), "--world-size", str(world), "--workers", "0",
            "--max-steps", str(args.steps), "--balance", "measured" if kind == "balanced" else "equal"]
    env = {**os.environ, "DDPSTUDIO_HOME": str(home), SLOW_ENV: slow}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{kind}: exit {done.returncode}\n{done.stderr[-2000:]}")
    parser, evs = protocol.EventParser(), []
    for line in done.stdout.splitlines():
        evs.extend(parser.feed(line))
    times = measured_step_times(rank0_step_stamps(evs), args.warmup)
    balanced = [e for e in evs if e.type == protocol.BATCH_BALANCED]
    return {"samples_per_s": throughput(times, args.batch_size * world),
            "batches": balanced[0].get("batches") if balanced else [args.batch_size] * world}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=32, help="per rank in the equal run (global: twice that)")
    p.add_argument("--slow", type=float, default=0.01, help="seconds rank 1 sleeps per sample")
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="ddpstudio-balance-") as home:
        for i in range(args.rounds):
            order = KINDS if i % 2 == 0 else tuple(reversed(KINDS))  # drift on a shared machine hits all
            rounds.append({kind: run(kind, args, Path(home)) for kind in order})
    print(f"{args.model} {args.image_size} px, global batch {2 * args.batch_size}, rank 1 slowed by "
          f"{args.slow * 1e3:g} ms per sample, {args.steps} steps ({args.warmup} warm-up), 2 Gloo ranks on the CPU\n")
    print("| round | solo fast | solo slow | ideal (sum) | equal | balanced (batches) | balanced / ideal "
          "| balanced / equal |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for i, r in enumerate(rounds, 1):
        ideal = r["solo fast"]["samples_per_s"] + r["solo slow"]["samples_per_s"]
        bal, eq = r["balanced"]["samples_per_s"], r["equal"]["samples_per_s"]
        ratios.append((bal / ideal, bal / eq))
        print(f"| {i} | {r['solo fast']['samples_per_s']:.1f} | {r['solo slow']['samples_per_s']:.1f} | {ideal:.1f} "
              f"| {eq:.1f} | {bal:.1f} ({'/'.join(map(str, r['balanced']['batches']))}) | {bal / ideal:.2f} "
              f"| {bal / eq:.2f} |")
    print(f"\nmedian balanced / ideal {statistics.median(x for x, _ in ratios):.2f}, "
          f"balanced / equal {statistics.median(y for _, y in ratios):.2f} (samples/s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rounds": rounds}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
