"""The built-in recipe's steady samples/s against the same model's tight-loop ceiling, side by side.

    .venv/bin/python benchmarks/recipe_ceiling.py [--model resnet18] [--image-size 32] [--batch-size 32]
        [--steps 30] [--warmup 5] [--rounds 3] [--workers N] [--source DIR]

Each round runs, in alternating order so drift on a shared machine hits both:

* the recipe with its defaults, one rank: ``ddpstudio run --world-size 1 --max-steps W+N --json``;
  samples/s from rank 0's ``step`` event stamps after the ``W`` warm-up steps (core/bench/timing.py);
* the ceiling: a fresh process that builds the same model on the same device with the same
  precision (rank/precision.py, when the measured tree has it), the same optimiser and batch, on one
  device-resident batch of random images, and times ``N`` steps after ``W`` in a loop that reads
  nothing back (one thread on the CPU, as the recipe's rank).

The table gives the medians over the rounds: samples/s and the ratio recipe / ceiling (each round's
recipe against that round's ceiling). ``--source`` (repeatable) measures other checkouts' recipes
in the same rounds, e.g. the commit before a change beside the change.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from overhead import cpu_between  # noqa: E402

CHILD = "--ceiling-child"


# -- the ceiling, in its own process -------------------------------------------------

def ceiling(cfg: dict) -> dict:
    import torch
    import torchvision

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda:
        torch.set_num_threads(1)  # the recipe's rank: RecipeSpec.threads
    model = torchvision.models.get_model(cfg["model"], weights=None, num_classes=10).to(device)
    try:
        from ddpstudio.rank import precision

        chosen = precision.for_model(model, device.type, True)
        dtype, scaler_on, channels_last, name = chosen.autocast, chosen.grad_scaler, chosen.channels_last, chosen.name
    except ImportError:  # a tree from before rank/precision.py: fp16 + GradScaler on CUDA, as it trained
        dtype, scaler_on, channels_last = ("float16", True, False) if cuda else (None, False, False)
        name = "fp16" if cuda else "fp32"
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    images = torch.randn(cfg["batch"], 3, cfg["size"], cfg["size"], device=device).contiguous(memory_format=fmt)
    labels = torch.randint(0, 10, (cfg["batch"],), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=scaler_on)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        with torch.autocast(device.type, dtype=getattr(torch, dtype) if dtype else None, enabled=dtype is not None):
            loss = loss_fn(model(images), labels)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(cfg["warmup"]):
        step()
    if cuda:
        torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(cfg["steps"]):
        step()
    if cuda:
        torch.cuda.synchronize()
    samples = cfg["batch"] * cfg["steps"]
    return {"samples_per_s": samples / (time.perf_counter() - t0), "samples_per_cpu_s": samples / (
            time.process_time() - c0), "precision": name, "device": torch.cuda.get_device_name() if cuda else "cpu"}


# -- the recipe, through the command line ----------------------------------------------

def recipe(args, env: dict[str, str], work: Path) -> dict:
    from ddpstudio.core import protocol
    from ddpstudio.core.bench.timing import (mean_data_wait, measured_step_times, rank0_step_stamps,
                                             read_rank_events, throughput)

    cmd = [sys.executable, "-m", "ddpstudio", "run", "--json", "--world-size", "1", "--model", args.model,
           "--image-size", str(args.image_size), "--batch-size", str(args.batch_size),
           "--max-steps", str(args.warmup + args.steps)]
    if args.synthetic_samples:  # one epoch holds the whole window: no evaluation inside it
        cmd += ["--synthetic-samples", str(args.batch_size * (args.warmup + args.steps))]
    if args.workers is not None:
        cmd += ["--workers", str(args.workers)]
    out = work / "recipe.out"
    with open(out, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=work,
                                stdin=subprocess.DEVNULL)
        timeline = rank_cpu_timeline(proc, args.timeout)
    text = out.read_text(encoding="utf-8")
    parser = protocol.EventParser()
    events = [ev for line in text.splitlines() for ev in parser.feed(line)]
    started = next((ev for ev in events if ev.type == protocol.RUN_STARTED), None)
    if proc.returncode != 0 or started is None:
        raise RuntimeError(f"the recipe failed ({proc.returncode}):\n{text[-3000:]}")
    rank0 = read_rank_events(Path(started.get("run_dir")) / "events" / "rank0.jsonl")
    stamps = rank0_step_stamps(rank0)
    times = measured_step_times(stamps, args.warmup)
    cpu = cpu_between(timeline, 1, stamps[args.warmup - 1][1], stamps[-1][1])
    lines = [str(ev.get("line")) for ev in events if ev.type == protocol.LOG]
    workers = next((r for r in started.get("reasons") or [] if r.startswith("DataLoader workers")), "workers: 0")
    return {"samples_per_s": throughput(times, args.batch_size), "data_wait": mean_data_wait(rank0, args.warmup),
            "samples_per_cpu_s": args.batch_size * len(times) / cpu if cpu else None,
            "precision": next((ln.split(": ", 1)[1] for ln in lines if ln.startswith("precision: ")), "(not said)"),
            "workers": workers}


def rank_cpu_timeline(proc: subprocess.Popen, timeout: float) -> list[tuple[float, float]]:
    """Until ``proc`` ends: (wall time, CPU seconds of the rank and its DataLoader workers) every 0.1 s."""
    import psutil

    deadline, timeline, cpu = time.monotonic() + timeout, [], {}
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the recipe did not finish in time")
        try:
            tree = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            tree = []
        ranks = [p for p in tree if _is_rank(p)]
        for p in [*ranks, *(c for r in ranks for c in _children(r))]:
            try:
                t = p.cpu_times()
                cpu[p.pid] = t.user + t.system
            except psutil.Error:
                continue
        timeline.append((time.time(), sum(cpu.values())))
        time.sleep(0.1)
    return timeline


def _is_rank(p) -> bool:
    try:
        return "ddpstudio.rank.recipe" in " ".join(p.cmdline())
    except Exception:  # psutil.Error: gone meanwhile
        return False


def _children(p) -> list:
    try:
        return p.children(recursive=True)
    except Exception:  # psutil.Error
        return []


def _child_env(source: Path, home: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(source), "DDPSTUDIO_HOME": str(home), "OMP_NUM_THREADS": "1"}
    env.pop("DDPSTUDIO_EVENTS_DIR", None)
    return env


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, help="pass --workers to the recipe (default: its own choice)")
    p.add_argument("--source", type=Path, action="append",
                   help="a checkout whose recipe is measured (repeat to compare, e.g. before and after a "
                        "change; the ceiling comes from the first); default: this one")
    p.add_argument("--synthetic-samples", action="store_true",
                   help="size the recipe's epoch to hold the warm-up and the timed steps (so no epoch ends, and "
                        "no evaluation runs, inside them); for trees since --synthetic-samples (4833c83)")
    p.add_argument("--timeout", type=float, default=900)
    args = p.parse_args()
    sources = [s.resolve() for s in args.source or [REPO]]
    cfg = {"model": args.model, "size": args.image_size, "batch": args.batch_size, "steps": args.steps,
           "warmup": args.warmup}
    kinds = ["ceiling", *range(len(sources))]
    rows, loads = [], []
    with tempfile.TemporaryDirectory(prefix="recipe-ceiling-") as tmp:
        for r in range(args.rounds):
            row: dict = {}
            for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:  # rotate the order each round
                loads.append(os.getloadavg()[0])
                if kind == "ceiling":
                    env = _child_env(sources[0], Path(tmp) / "home")
                    out = subprocess.run([sys.executable, __file__, CHILD, json.dumps(cfg)], capture_output=True,
                                         text=True, env=env, timeout=args.timeout, check=True)
                    row["ceiling"] = json.loads(out.stdout.strip().splitlines()[-1])
                else:
                    row[kind] = recipe(args, _child_env(sources[kind], Path(tmp) / f"home{kind}"), Path(tmp))
            for i in range(len(sources)):
                row[i]["ratio"] = row[i]["samples_per_s"] / row["ceiling"]["samples_per_s"]
                cpu = row[i]["samples_per_cpu_s"]
                row[i]["cpu_ratio"] = cpu / row["ceiling"]["samples_per_cpu_s"] if cpu else None
            rows.append(row)
            print(f"round {r + 1}: ceiling {row['ceiling']['samples_per_s']:.1f} samples/s; " + "; ".join(
                f"recipe {i + 1} {row[i]['samples_per_s']:.1f} ({row[i]['ratio']:.3f}, CPU "
                f"{row[i]['cpu_ratio'] or float('nan'):.3f})" for i in range(len(sources))), file=sys.stderr)
    import torch

    print(f"\n{args.model} at {args.image_size} px, batch {args.batch_size}, 1 rank, {rows[0]['ceiling']['device']}; "
          f"{args.steps} steps after {args.warmup}, {args.rounds} rounds in rotating order; torch {torch.__version__}; "
          f"{os.cpu_count()} cores, load average {min(loads):.1f}-{max(loads):.1f} (1 min)\n")
    print("| recipe | samples/s | ceiling samples/s | recipe / ceiling (spread) | samples per CPU-second, "
          "recipe / ceiling (spread) | data wait |")
    print("|---|---|---|---|---|---|")
    med = statistics.median
    for i, source in enumerate(sources):
        ratios = [row[i]["ratio"] for row in rows]
        cpu = [row[i]["cpu_ratio"] for row in rows if row[i]["cpu_ratio"]]
        waits = [row[i]["data_wait"] for row in rows if row[i]["data_wait"] is not None]
        print(f"| {i + 1}: {source} | {med(row[i]['samples_per_s'] for row in rows):.1f} | "
              f"{med(row['ceiling']['samples_per_s'] for row in rows):.1f} | **{med(ratios):.3f}** "
              f"({min(ratios):.3f}-{max(ratios):.3f}) | "
              + (f"**{med(cpu):.3f}** ({min(cpu):.3f}-{max(cpu):.3f})" if cpu else "") + " | "
              + (f"{100 * med(waits):.1f}%" if waits else "") + " |")
    print("\nAll medians over the rounds; a ratio compares a round's recipe with that round's ceiling. Samples "
          "per CPU-second (the rank's and its workers' CPU time over the measured steps, against the "
          "ceiling process's) is the figure a loaded machine disturbs least.")
    print(f"\nceiling precision: {rows[0]['ceiling']['precision']}")
    for i, source in enumerate(sources):
        print(f"recipe {i + 1}: precision {rows[0][i]['precision']}; {rows[0][i]['workers']}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD:
        print(json.dumps(ceiling(json.loads(sys.argv[2]))))
        sys.exit(0)
    sys.exit(main())
