"""The recipe's step against the tight loop, timed with device syncs, with parts of the recipe switched off.

    python3 benchmarks/recipe_parts.py [--rounds 2] [--small]

``gpu.py`` times the recipe from its step events' host stamps over 50 steps; on a GPU box whose own
speed drifts, that cannot say which part of the recipe costs what. Here the real ``ddpstudio run
--world-size 1`` rank times a window of steps with the device synchronised at both ends
(``recipe_parts_site/sitecustomize.py``), in runs that switch off the report points' reads
(``noflush``), the per-step synthetic batch (``fixedbatch``) and DDP (``noddp``), beside the same model
in a tight loop in this process (bf16 autocast and channels_last on CUDA, as the recipe). Rounds
alternate their order. ``--small`` is a smoke form for the CPU (tiny batches, few steps).

Prints one markdown table: milliseconds per step, each run's value, and the tight loop's over the median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SITE = Path(__file__).resolve().parent / "recipe_parts_site"
PARTS = [[], ["noflush"], ["fixedbatch"], ["noddp"], ["noflush", "fixedbatch", "noddp"]]


def _sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def tight(model_name: str, size: int, batch: int, warmup: int, steps: int) -> dict:
    import torch
    import torchvision

    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    fmt = torch.channels_last if cuda else torch.contiguous_format
    if not cuda:
        torch.set_num_threads(1)  # the recipe's rank: RecipeSpec.threads
    model = torchvision.models.get_model(model_name, weights=None, num_classes=10).to(dev).to(memory_format=fmt)
    x = torch.randn(batch, 3, size, size, device=dev).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (batch,), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    _sync(torch)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    _sync(torch)
    return dict(off=["tight loop"], wall_ms=1e3 * (time.perf_counter() - t0) / steps,
                cpu_ms=1e3 * (time.process_time() - c0) / steps, flushes=0)


def recipe(model_name: str, size: int, batch: int, warmup: int, steps: int, off: list[str]) -> dict | None:
    out = Path(tempfile.mkdtemp(prefix="recipe-parts-"))
    env = dict(os.environ, PARTS_OUT=str(out), PARTS_OFF=",".join(off), PARTS_W=str(warmup), PARTS_N=str(steps),
               PARTS_SAMPLES=str((warmup + steps + 8) * batch),
               PYTHONPATH=os.pathsep.join(filter(None, [str(SITE), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "ddpstudio", "run", "--world-size", "1", "--model", model_name, "--image-size",
           str(size), "--batch-size", str(batch), "--max-steps", str(warmup + steps + 2), "--json"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    found = list(out.glob("r*.json"))
    if proc.returncode or not found:
        print(f"the run with {off or 'everything'} failed ({proc.returncode}):\n{proc.stdout[-1500:]}"
              f"\n{proc.stderr[-1500:]}", file=sys.stderr, flush=True)
        return None
    return json.loads(found[0].read_text())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--small", action="store_true", help="tiny batches and few steps: a smoke form for the CPU")
    args = p.parse_args(argv)
    import torch

    small = args.small
    configs = [("resnet18", 32, 8 if small else 64, 3 if small else 30, 6 if small else 300, PARTS),
               ("resnet50", 64 if small else 224, 8 if small else 64, 3 if small else 15, 4 if small else 100,
                [PARTS[0], PARTS[3], PARTS[4]])]
    rows: dict[tuple[str, str], list[dict]] = {}
    t_start = time.time()
    for r in range(args.rounds):
        for model, size, batch, warmup, steps, parts in configs:
            order = [None, *parts]
            for off in (reversed(order) if r % 2 else order):
                res = (tight(model, size, batch, warmup, steps) if off is None
                       else recipe(model, size, batch, warmup, steps, off))
                if res is None:
                    continue
                key = (model, ", ".join(res["off"]) or "recipe")
                rows.setdefault(key, []).append(res)
                print(f"round {r + 1}: {key} {res['wall_ms']:.2f} ms/step", file=sys.stderr, flush=True)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    print(f"\n{device}; torch {torch.__version__}; {time.time() - t_start:.0f} s; {args.rounds} rounds\n")
    print("| model | run (parts off) | ms/step, median (each run) | host CPU ms/step | tight loop / this |")
    print("|---|---|---|---|---|")
    for model, *_ in configs:
        tight_rows = rows.get((model, "tight loop"))
        base = statistics.median(x["wall_ms"] for x in tight_rows) if tight_rows else None
        for (m, what), runs in rows.items():
            if m != model:
                continue
            wall = statistics.median(x["wall_ms"] for x in runs)
            each = ", ".join(f"{x['wall_ms']:.2f}" for x in runs)
            ratio = f"{base / wall:.3f}" if base else "-"
            print(f"| {m} | {what} | {wall:.2f} ({each}) | {statistics.median(x['cpu_ms'] for x in runs):.2f} "
                  f"| {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
