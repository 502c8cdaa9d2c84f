"""Balanced against equal batches with one rank deliberately slowed, and the ideal (issue 25 §1).

    .venv/bin/python benchmarks/balance.py [--model mlp] [--batch-size 32] [--fast 0.002] [--slow 0.006]
        [--steps 40] [--warmup 5] [--rounds 2] [--json balance.json]

Rank 0 sleeps ``--fast`` and rank 1 ``--slow`` seconds per sample of each forward/backward
(``DDPSTUDIO_SLOW_RANK``, the seam in rank/balance.py): two simulated GPUs, one three times slower, on top
of the model's own CPU work. The default model is the tiny ``mlp``, so the simulated device time
dominates: CPU ranks share this machine's cores, and with a model whose compute dominates (``--model
resnet18 --fast 0``) two ranks together are slower than the sum of each alone, whatever their batches.
Each round runs, in turn:

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
    slow = {"solo fast": f"0:{args.fast}", "solo slow": f"0:{args.slow}"}.get(kind, f"0:{args.fast},1:{args.slow}")
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
    p.add_argument("--model", default="mlp")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=32, help="per rank in the equal run (global: twice that)")
    p.add_argument("--fast", type=float, default=0.002, help="seconds rank 0 sleeps per sample")
    p.add_argument("--slow", type=float, default=0.006, help="seconds rank 1 sleeps per sample")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="ddpstudio-balance-") as home:
        for i in range(args.rounds):
            order = KINDS if i % 2 == 0 else tuple(reversed(KINDS))  # drift on a shared machine hits all
            rounds.append({kind: run(kind, args, Path(home)) for kind in order})
    print(f"{args.model} {args.image_size} px, global batch {2 * args.batch_size}, ranks slowed by "
          f"{args.fast * 1e3:g} and {args.slow * 1e3:g} ms per sample, {args.steps} steps ({args.warmup} warm-up), 2 Gloo ranks on the CPU\n")
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
