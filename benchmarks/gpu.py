"""DDP Studio on one GPU in one short call: one markdown table of ratios measured side by side (issue 20).

    python3 benchmarks/gpu.py [--cpu] [--rounds N] [--budget S] [--parts ceiling,launch,exchange] [--json out.json]

Three parts, each a ratio of two things measured in the same call on the same machine:

* ``ceiling``: the built-in recipe with its defaults (``ddpstudio run --world-size 1``, steady samples/s
  from rank 0's step events, as ``overhead.py`` measures it) against the same model in a tight loop on
  device-resident data, same batch and precision (the GPU's own ceiling); resnet18 at 32 px and
  resnet50 at 224 px on a GPU.
* ``launch``: a plain torchrun-style script (``rank_helper.py``'s: DDP, loss printed every step)
  through ``ddpstudio run --script`` with the rank helper and with ``--no-rank-helper``, against
  ``torchrun``; the launches rotate order every round; ratios of the script's own steps/s over its
  whole measured loop, printing included.
* ``exchange``: two Gloo ranks sharing one GPU, each stepping native, staged and staged + fp16 DDP
  copies of one model in turn (``exchange.py --paired``) under ``torch.use_deterministic_algorithms``;
  the speed against native, and whether each copy's parameters still equal native's afterwards.

On a GPU the call keeps to a budget (``--budget``, 290 s): the exchange part (of fixed length) runs first,
then the ceiling and launch parts each run their first round and then another while its last one still
fits, up to ``--rounds``; the table says how many rounds each ratio had.

Without CUDA (or with ``--cpu``) the same parts run in a reduced form on the CPU (smaller models,
fewer steps), so CI can check that the script works; its ratios say little about a GPU. The script
installs nothing and uses whatever torch it finds. Runs land in ``$DDPSTUDIO_HOME`` (a temporary one if
unset).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import exchange  # noqa: E402
import overhead  # noqa: E402
import rank_helper  # noqa: E402

PARTS = ("ceiling", "launch", "exchange")
ORDER = ("exchange", "ceiling", "launch")  # the part of fixed length first, then those whose rounds fit the budget
BUDGET_S = 290.0  # on a GPU: issue 20 asks for under 5 minutes in one call


@dataclass(frozen=True)
class Sizes:
    """What one form of the benchmark measures: (model, image size, batch) pairs and step counts."""

    ceiling: tuple[tuple[str, int, int], ...]
    warmup: int
    steps: int
    launch_model: str
    launch_world: int
    launch_steps: int
    exchange: tuple[tuple[str, int], ...]  # (model, image size)
    exchange_batch: int
    exchange_rounds: int


# On a GPU: the models, timed over 200 steps after 20 (resnet18 at 32 px: about 2 s; resnet50 at 224 px:
# about 6 s on an H100). 50 steps, what one epoch of the default 4,096 images held, timed 0.4 s of resnet18, and
# a pair's ratio moved 0.73-1.14 between rounds of one call (2026-11-27); the recipe's epoch is sized to hold
# the whole window (--synthetic-samples), so no epoch end falls inside it.
GPU = Sizes(ceiling=(("resnet18", 32, 64), ("resnet50", 224, 64)), warmup=20, steps=200,
            launch_model="resnet18", launch_world=1, launch_steps=200,
            exchange=(("resnet18", 32), ("resnet50", 64)), exchange_batch=32, exchange_rounds=20)
# On the CPU: small enough for CI's 2 cores, where starting torch in each process costs most. The fewest
# steps that still measure (a rate needs two stamps after the warm-up: overhead._measure; the exchange one
# timed round), at the smallest sizes that still run each part's code: its figures say little anyway.
CPU = Sizes(ceiling=(("resnet18", 32, 4),), warmup=2, steps=3,
            launch_model="mlp", launch_world=1, launch_steps=20,
            exchange=(("mlp", 8),), exchange_batch=4, exchange_rounds=1)


@dataclass
class Row:
    part: str
    what: str
    measured: str  # what was measured, e.g. "recipe 440 samples/s"
    reference: str
    ratio: float | None
    note: str = ""


class Deadline:
    """The whole call's time budget: a part starts another round only if its last round fits before the end.

    A round of the ceiling part (two models, each a tight loop and a recipe launch) took 73 s on an H200, one
    of the launch part (three launches) about 60 s, and the exchange part 40 s in all (2026-11-28): three
    rounds of everything took 450 s, past the 5 minutes issue 20 allows, so the rounds adapt to the budget.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.end = None if seconds is None else time.monotonic() + seconds

    def rounds(self, most: int) -> Rounds:
        return Rounds(self, most)


class Rounds:
    """Iterates round numbers up to ``most``: always the first, then each next one whose time (the last round's)
    still fits the deadline; says afterwards how many ran and why it stopped."""

    def __init__(self, deadline: Deadline, most: int) -> None:
        self.deadline, self.most, self.ran, self.cut = deadline, most, 0, False

    def __iter__(self):
        last = 0.0
        for r in range(self.most):
            if r and self.deadline.end is not None and time.monotonic() + last > self.deadline.end:
                self.cut = True
                return
            started = time.monotonic()
            yield r
            last, self.ran = time.monotonic() - started, r + 1

    def said(self, how: str) -> str:
        text = f"{self.ran} {how} round{'s' if self.ran != 1 else ''}"
        if self.cut:
            text += f" (of {self.most}: the next did not fit the {self.deadline.seconds:.0f} s budget)"
        return text


def recipe_precision(device: str, convolutional: bool = True):
    """The precision the recipe trains in on ``device`` (its own rule, ``ddpstudio.rank.precision``: bf16
    where the GPU computes it natively, fp16 + GradScaler otherwise, channels_last for convolutions, fp32
    on the CPU; ``amp`` defaults to on), so the ceiling uses the same."""
    from ddpstudio.rank import precision

    native = device == "cuda" and precision.bf16_native()
    return precision.choose("cuda" if device == "cuda" else "cpu", True, native, convolutional)


# -- ceiling: the model in a tight loop ------------------------------------------------------------

def ceiling(model_name: str, image_size: int, batch: int, sizes: Sizes, device: str) -> float:
    """Samples/s of training steps on one fixed batch already on the device, in this process (which
    trains nothing else; a child would cost one more start of torch and torchvision)."""
    import torch
    import torchvision

    warmup, steps = sizes.warmup, sizes.steps
    dev = torch.device(device)
    if dev.type == "cpu":
        torch.set_num_threads(1)  # the recipe's one intra-op thread per rank on the CPU (plan.RecipeSpec.threads)
    model = torchvision.models.get_model(model_name, weights=None, num_classes=10).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)  # the recipe's
    chosen = recipe_precision(device)
    dtype = getattr(torch, chosen.autocast) if chosen.autocast else None
    scaler = torch.amp.GradScaler("cuda", enabled=chosen.grad_scaler)
    x = torch.randn(batch, 3, image_size, image_size, device=dev)
    if chosen.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(warmup):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    took = time.perf_counter() - started
    del model, opt, x, y
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # the recipe's rank comes next on the same GPU
    return batch * steps / took


def recipe(model: str, size: int, batch: int, sizes: Sizes, work: Path, timeout: float, n: int) -> tuple[float, float]:
    """(steady samples/s, median data_wait) of ``ddpstudio run`` with the recipe's defaults, one rank."""
    from ddpstudio.core.plan import RecipeSpec

    steps = sizes.warmup + sizes.steps
    epoch = max(RecipeSpec.synthetic_samples, (steps + 1) * batch)  # the window inside one epoch
    argv = ["run", "--model", model, "--batch-size", str(batch), "--image-size", str(size),
            "--max-steps", str(steps), "--synthetic-samples", str(epoch),
            "--world-size", "1", "--json"]
    args = argparse.Namespace(warmup=sizes.warmup, batch_size=batch, world_size=1, timeout=timeout)
    launch = overhead.launch_run(argv, dict(os.environ), args, n, work)
    events = overhead.read_rank_events(Path(launch.plan_path).parent / "events" / "rank0.jsonl")
    waits = [e.get("data_wait") for e in events if e.type == "step" and e.get("step", 0) > sizes.warmup]
    return launch.samples_per_s, statistics.median(w for w in waits if w is not None) if waits else float("nan")


def part_ceiling(sizes: Sizes, device: str, work: Path, timeout: float, rounds: int = 1,
                 deadline: Deadline | None = None) -> list[Row]:
    """Per model, up to ``rounds`` rounds of the tight loop and the recipe, in alternating order (a GPU's speed
    drifts by 10-20 % between minutes on a shared machine), as many as ``deadline`` leaves time for; the ratio
    of their medians. A round measures every model, so each model's pairs come from the same minutes."""
    deadline = deadline or Deadline(None)
    tops: dict[int, list[float]] = {n: [] for n in range(len(sizes.ceiling))}
    gots: dict[int, list[float]] = {n: [] for n in range(len(sizes.ceiling))}
    waits: dict[int, list[float]] = {n: [] for n in range(len(sizes.ceiling))}
    done = deadline.rounds(rounds)
    for r in done:
        for n, (model, size, batch) in enumerate(sizes.ceiling):
            print(f"ceiling: {model} {size} px [{r + 1}/{rounds}] ...", file=sys.stderr, flush=True)
            first_recipe = r % 2 == 1
            if first_recipe:
                got, wait = recipe(model, size, batch, sizes, work, timeout, 10 * (n + 1) + r)
            tops[n].append(ceiling(model, size, batch, sizes, device))
            if not first_recipe:
                got, wait = recipe(model, size, batch, sizes, work, timeout, 10 * (n + 1) + r)
            gots[n].append(got)
            waits[n].append(wait)
    rows = []
    for n, (model, size, batch) in enumerate(sizes.ceiling):
        top, got = statistics.median(tops[n]), statistics.median(gots[n])
        pairs = ", ".join(f"{g / t:.3f}" for g, t in zip(gots[n], tops[n]))
        rows.append(Row("recipe / ceiling", f"{model} {size} px, batch {batch}, {recipe_precision(device).name}",
                        f"recipe {got:,.1f} samples/s", f"tight loop {top:,.1f} samples/s", got / top,
                        f"recipe's data_wait {statistics.median(waits[n]):.2f}; {done.said('alternating')}; "
                        f"pairs {pairs}"))
    return rows


# -- launch: studio against torchrun on a plain script ---------------------------------------------

def torchrun_once(script: Path, args: argparse.Namespace) -> float:
    """The plain script's steps/s over its measured loop under torchrun (rank 0's output only)."""
    from ddpstudio.core.rendezvous.ports import find_free_port

    cmd = overhead._tool("torchrun", "torch.distributed.run") + [
        "--nproc-per-node", str(args.world_size), "--master-addr", "127.0.0.1", "--master-port",
        str(find_free_port()), "--local-ranks-filter", "0", str(script), *rank_helper.script_args(args)]
    # What DDP Studio's launcher gives every rank (core/launch/commands.py rank_env), set here by hand.
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env,
                          stdin=subprocess.DEVNULL)
    found = [m for line in done.stdout.splitlines() if (m := rank_helper._LOOP.search(line))]
    if done.returncode != 0 or not found:
        raise RuntimeError(f"torchrun failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return float(found[0].group(1))


def studio_once(script: Path, helper: bool, args: argparse.Namespace) -> float:
    got = rank_helper.result(rank_helper.start(script, helper, args), helper, args)
    if got is None:
        raise RuntimeError(f"ddpstudio run --script with the helper {'on' if helper else 'off'} failed")
    return got["steps_per_s"]


def part_launch(sizes: Sizes, rounds: int, work: Path, timeout: float, deadline: Deadline | None = None) -> list[Row]:
    args = argparse.Namespace(model=sizes.launch_model, warmup=max(5, sizes.launch_steps // 10),
                              steps=sizes.launch_steps, world_size=sizes.launch_world, timeout=timeout)
    script = work / "ddp_plain_script.py"
    script.write_text(rank_helper.SCRIPT, encoding="utf-8")
    kinds = ("torchrun", "helper", "no helper")
    got: dict[str, list[float]] = {k: [] for k in kinds}
    done = (deadline or Deadline(None)).rounds(rounds)
    for r in done:
        for kind in kinds[r % 3:] + kinds[:r % 3]:  # rotate: no launch always goes first
            print(f"launch [{r + 1}/{rounds}]: {kind} ...", file=sys.stderr, flush=True)
            got[kind].append(torchrun_once(script, args) if kind == "torchrun"
                             else studio_once(script, kind == "helper", args))
    what = (f"plain script ({args.model}, {args.world_size} rank{'s' if args.world_size > 1 else ''}, loss printed "
            f"every step), {args.steps} steps")
    rows = []
    for kind, flag in (("helper", "with the rank helper"), ("no helper", "--no-rank-helper")):
        ratios = [a / b for a, b in zip(got[kind], got["torchrun"])]
        rows.append(Row("studio / torchrun", f"{what}, {flag}",
                        f"studio {statistics.median(got[kind]):,.1f} steps/s",
                        f"torchrun {statistics.median(got['torchrun']):,.1f} steps/s", statistics.median(ratios),
                        f"{done.said('rotating')}; pairs "
                        + ", ".join(f"{v:.3f}" for v in ratios)))
    return rows


# -- exchange: native against staged with 2 Gloo ranks sharing one device -------------------------

def part_exchange(sizes: Sizes, device: str, rounds: int) -> list[Row]:
    models = [m for m, _ in sizes.exchange]
    print(f"exchange: {', '.join(models)} ...", file=sys.stderr, flush=True)
    results = exchange.paired(models, rounds, sizes.exchange_batch, device=device, deterministic=True,
                              sizes=dict(sizes.exchange))
    rows = []
    for model, size in sizes.exchange:
        if model not in results:
            raise RuntimeError(f"the exchange part failed for {model}")
        r = results[model]
        base = statistics.median(r["times"]["native"])
        for name, values in r["times"].items():
            if name == "native":
                continue
            step = statistics.median(values)
            agree = r["agreement"][name]
            params = ("parameters bit-identical to native" if agree["identical"]
                      else f"parameters differ from native by up to {agree['max_abs_diff']:.2e}")
            rows.append(Row("exchange / native", f"{model} {size} px, batch {sizes.exchange_batch}, {name}",
                            f"{exchange.WORLD * sizes.exchange_batch / step:,.1f} samples/s",
                            f"native {exchange.WORLD * sizes.exchange_batch / base:,.1f} samples/s", base / step,
                            f"{params} after {rounds + 2} steps (deterministic kernels)"))
    return rows


# -- the report ------------------------------------------------------------------------------------

def machine_line(device: str) -> str:
    """Device, driver, torch: the line above the table."""
    import torch

    from ddpstudio.core.gpu import detect_inventory

    inventory = detect_inventory()
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    where = (f"{torch.cuda.get_device_name(0)} (of {torch.cuda.device_count()})" if device == "cuda"
             else f"CPU only ({platform.processor() or platform.machine()})")
    driver = f"driver {inventory.driver_version}" if inventory.driver_version else "no NVIDIA driver"
    return (f"Device: {where}; {driver}; torch {torch.__version__} (CUDA {torch.version.cuda}); "
            f"Python {platform.python_version()}; {platform.system()} {platform.release()}; "
            f"{os.cpu_count()} cores; load average {load}")


def table(rows: list[Row]) -> str:
    lines = ["| part | what | measured | against | ratio | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = "failed" if r.ratio is None else f"{r.ratio:.3f}"
        lines.append(f"| {r.part} | {r.what} | {r.measured} | {r.reference} | {ratio} | {r.note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="the reduced CPU form even where CUDA is available")
    p.add_argument("--parts", default=",".join(PARTS), help=f"which parts (default {','.join(PARTS)})")
    p.add_argument("--rounds", type=int, help="rounds of the ceiling and launch parts (default 3 on a GPU, 1 on the CPU)")
    p.add_argument("--budget", type=float, help="seconds the whole call may take: rounds after the first are left out "
                   "when they would not fit (default 290 on a GPU, none on the CPU)")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds per launch before it fails")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args(argv)
    parts = [x for x in args.parts.split(",") if x]
    if any(x not in PARTS for x in parts):
        p.error(f"--parts takes a comma-separated subset of {','.join(PARTS)}")

    if args.cpu:  # before CUDA starts, here and in every child: plain scripts pick their device themselves
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    sizes = GPU if device == "cuda" else CPU
    rounds = args.rounds or (3 if device == "cuda" else 1)
    work = Path(tempfile.mkdtemp(prefix="ddpstudio-gpu-bench-"))
    os.environ.setdefault("DDPSTUDIO_HOME", str(work / "home"))
    started = time.monotonic()
    deadline = Deadline(args.budget if args.budget is not None else (BUDGET_S if device == "cuda" else None))
    measured: dict[str, list[Row]] = {}
    head = machine_line(device)
    measure = {"ceiling": lambda: part_ceiling(sizes, device, work, args.timeout, rounds, deadline),
               "launch": lambda: part_launch(sizes, rounds, work, args.timeout, deadline),
               "exchange": lambda: part_exchange(sizes, device, sizes.exchange_rounds)}
    try:
        for part in (x for x in ORDER if x in parts):
            got = measured[part] = measure[part]()
            # Each part's rows as soon as it ends: a call cut short by its time limit keeps what it measured.
            print(f"\n{table(got)}", file=sys.stderr, flush=True)
            if args.json:
                write_json(args.json, head, device, time.monotonic() - started, in_order(measured))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    took, rows = time.monotonic() - started, in_order(measured)
    print(f"\n{head}\n\n{table(rows)}\n\nMeasured in {took:.0f} s"
          f"{'' if device == 'cuda' else ' (the reduced CPU form: its ratios say little about a GPU)'}.")
    if args.json:
        write_json(args.json, head, device, took, rows)
    return 0


def in_order(measured: dict[str, list[Row]]) -> list[Row]:
    """The rows in the table's order (ceiling, launch, exchange), whatever order the parts ran in."""
    return [row for part in PARTS for row in measured.get(part, [])]


def write_json(path: str, head: str, device: str, took: float, rows: list[Row]) -> None:
    Path(path).write_text(json.dumps({"machine": head, "device": device, "seconds": took,
                                      "rows": [asdict(r) for r in rows]}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
