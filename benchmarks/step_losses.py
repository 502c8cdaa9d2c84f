"""What the rank helper's step and loss watch (rank/steploss.py) costs a training step, measured in one process.

    .venv/bin/python benchmarks/step_losses.py [--rounds 7] [--steps 3000]

A tight loop of the cheapest real step (a 32x32 linear layer, batch 8, SGD,
``loss.backward()`` and ``optimizer.step()``: about the per-step Python
work of benchmarks/plain/mlp.py without its Gloo all-reduce or printing) is
timed in alternating rounds, bare and with the watch installed in this
process (its events going to a temporary folder, as in a rank). Installing
cannot be undone in a process, so each round's "watched" loop runs in a
fresh interpreter as does its "bare" loop. The table gives the median
microseconds per step of each, their difference (the watch's cost per step)
and that cost as a share of the bare step; at most about 20 reports a
second are written after the first 50 steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOOP = r"""
import json, os, sys, time
import torch
from torch import nn
watched = sys.argv[1] == "watched"
steps = int(sys.argv[2])
if watched:
    os.environ["DDPSTUDIO_EVENTS_DIR"] = sys.argv[3]
    from ddpstudio.rank.emit import Emitter
    from ddpstudio.rank import stepwatch
    stepwatch.install(Emitter(0), 1)
torch.manual_seed(0)
model = nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(8, 32)
def step():
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
for _ in range(200):
    step()
start = time.perf_counter()
for _ in range(steps):
    step()
print(json.dumps((time.perf_counter() - start) / steps * 1e6))
"""


def one(kind: str, steps: int, events: str) -> float:
    out = subprocess.run([sys.executable, "-c", LOOP, kind, str(steps), events], capture_output=True, text=True,
                         check=True, cwd=ROOT, env={"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
                                                    "PATH": "/usr/bin:/bin"})
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=3000)
    args = p.parse_args()
    bare, watched = [], []
    with tempfile.TemporaryDirectory() as events:
        for i in range(args.rounds):
            order = ("bare", "watched") if i % 2 == 0 else ("watched", "bare")
            for kind in order:
                (bare if kind == "bare" else watched).append(one(kind, args.steps, events))
            print(f"[{i + 1}/{args.rounds}] bare {bare[-1]:.1f} us, watched {watched[-1]:.1f} us", flush=True)
    diffs = [w - b for b, w in zip(bare, watched)]
    b, w, d = statistics.median(bare), statistics.median(watched), statistics.median(diffs)
    print(f"\n{args.rounds} alternating rounds of {args.steps} steps, one CPU thread\n")
    print("| step | us per step, median (min-max) |")
    print("|---|---|")
    print(f"| bare | {b:.1f} ({min(bare):.1f}-{max(bare):.1f}) |")
    print(f"| watched (rank/steploss.py) | {w:.1f} ({min(watched):.1f}-{max(watched):.1f}) |")
    print(f"| cost of the watch, per round | {d:.1f} ({min(diffs):.1f}-{max(diffs):.1f}): "
          f"{d / b:.1%} of the bare step |")


if __name__ == "__main__":
    main()
