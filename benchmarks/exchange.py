"""Staged against native gradient exchange on this machine: samples/s, same training, alternating launches.

    .venv/bin/python benchmarks/exchange.py [--models resnet18,vgg11] [--repeats 2] [--steps 10] [--warmup 3]

For each model, ``ddpstudio run --world-size 2 --grad-exchange native``, then
``staged``, then ``staged --grad-compression fp16``, then again, alternating,
so drift on a shared machine hits every mode alike. Steady-state samples/s
comes from rank 0's ``step`` events after the warm-up (as in the scaling
benchmark); the table gives the median over the repeats and the ratio to
native. resnet18 (11.7 M parameters) is the demo model; vgg11 (132.9 M
parameters, 0.5 GB of gradients per step, little compute at 32x32) is one
where communication weighs more.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ddpstudio.core import protocol  # noqa: E402
from ddpstudio.core.bench.timing import measured_step_times, rank0_step_stamps, throughput  # noqa: E402

MODES = (("native", "none"), ("staged", "none"), ("staged", "fp16"))
WORLD = 2


def label(mode: tuple[str, str]) -> str:
    return mode[0] + (" + fp16" if mode[1] == "fp16" else "")


def one_run(model: str, mode: tuple[str, str], args: argparse.Namespace) -> float | None:
    """Steady-state samples/s of one launch (None if it failed)."""
    cmd = [sys.executable, "-m", "ddpstudio", "run", "--json", "--model", model, "--world-size", str(WORLD),
           "--batch-size", str(args.batch_size), "--image-size", str(args.image_size),
           "--max-steps", str(args.warmup + args.steps), "--grad-exchange", mode[0], "--grad-compression", mode[1]]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=900, stdin=subprocess.DEVNULL,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    parser = protocol.EventParser()
    events = [ev for line in res.stdout.splitlines() for ev in parser.feed(line)]
    if res.returncode != 0:
        print(f"  {model} {label(mode)} failed (exit {res.returncode}): {res.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    times = measured_step_times(rank0_step_stamps(events), args.warmup)
    return throughput(times, WORLD * args.batch_size)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet18,vgg11")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    args = p.parse_args(argv)
    results: dict[str, dict[str, list[float]]] = {}
    for model in args.models.split(","):
        results[model] = {label(m): [] for m in MODES}
        for repeat in range(args.repeats):
            for mode in MODES:
                value = one_run(model, mode, args)
                print(f"{model} {label(mode)} #{repeat + 1}: "
                      + (f"{value:.1f} samples/s" if value else "failed"), file=sys.stderr, flush=True)
                if value:
                    results[model][label(mode)].append(value)
    print(f"\n{WORLD} ranks, Gloo on the CPU, batch {args.batch_size} per rank, {args.image_size}x{args.image_size}, "
          f"{args.steps} measured steps after {args.warmup}, median of {args.repeats} alternating launches")
    print(f"| model | exchange | samples/s | ratio to native |\n|---|---|---|---|")
    for model, by_mode in results.items():
        base = statistics.median(by_mode["native"]) if by_mode["native"] else None
        for name, values in by_mode.items():
            if not values:
                print(f"| {model} | {name} | failed | |")
                continue
            value = statistics.median(values)
            ratio = f"{value / base:.3f}" if base else ""
            print(f"| {model} | {name} | {value:.1f} ({', '.join(f'{v:.1f}' for v in values)}) | {ratio} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "samples_per_s": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
