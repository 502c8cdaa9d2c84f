"""Staged against native gradient exchange on this machine: samples/s, same training, alternating launches.

    .venv/bin/python benchmarks/exchange.py [--models resnet18,vgg11] [--repeats 2] [--steps 10] [--warmup 3]
    .venv/bin/python benchmarks/exchange.py --paired [--models resnet18,alexnet] [--rounds 20] [--device cuda] [--deterministic]

For each model, ``ddpstudio run --world-size 2 --grad-exchange native``, then
``staged``, then ``staged --grad-compression fp16``, then again, alternating,
so drift on a shared machine hits every mode alike. Steady-state samples/s
comes from rank 0's ``step`` events after the warm-up (as in the scaling
benchmark); the table gives the median over the repeats and the ratio to
native. resnet18 (11.7 M parameters) is the demo model; vgg11 (132.9 M
parameters, 0.5 GB of gradients per step, little compute at 32x32) is one
where communication weighs more.

On a busy shared machine single launches spread by 2x, so ``--paired`` also
alternates at the finest grain: two long-lived Gloo ranks each hold DDP
copies of one model, native, staged and staged+fp16 (hooks registered by
``ddpstudio.rank.staged.register``, as in the recipe) and, for scale, one
with torch's reference ``allreduce_hook`` (the price of any Python
communication hook), and step them in turn, rotating the order every round,
with a barrier before each step. Medians of the step times give the ratios.
alexnet at 64x64 (57 M parameters, almost all in its fully connected layers)
is the communication-heavy model there: four copies of vgg11 would not fit
beside the other work on this machine. Every copy starts from the same
weights, so the table also says whether each one's parameters still equal
native's after the rounds (with ``--deterministic``, a real comparison).
``--device cuda`` puts both ranks on GPU 0 (Gloo on CUDA tensors), as
``benchmarks/gpu.py`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
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


PAIRED_MODELS = {"resnet18": 32, "alexnet": 64, "resnet50": 64}  # model -> image size (alexnet needs 63 px or more)
REFERENCE = "torch allreduce_hook"  # torch's reference Python hook: what staged must not exceed


def build_model(name: str, image_size: int):
    """A torchvision classifier, or ``mlp``: two hidden layers of 512 (no torchvision to start, for CI)."""
    import torch

    if name == "mlp":
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * image_size * image_size, 512),
                                   torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                   torch.nn.Linear(512, 10))
    import torchvision

    return torchvision.models.get_model(name, weights=None, num_classes=10)


def paired_worker(rank: int, store: str, model_name: str, image_size: int, rounds: int, batch: int,
                  device: str = "cpu", deterministic: bool = False) -> None:
    """One rank of the paired measurement: DDP copies of one model, stepped in turn.

    Every copy starts from the same weights and sees the same batches, so after the rounds each copy's
    parameters can be compared with native's (``agreement``: bit-identical, or the largest difference).
    With ``device="cuda"`` both ranks share GPU 0 and Gloo all-reduces CUDA tensors (native) or the
    staged hook copies them through the CPU; ``deterministic`` turns on torch's deterministic kernels
    (warn-only: an op without one still runs, so a difference may come from it, not the exchange).
    """
    import copy

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddpstudio.rank.staged import register

    torch.set_num_threads(1)
    on_gpu = device == "cuda"
    if on_gpu:
        torch.cuda.set_device(0)
    if deterministic:  # CUDA's cuBLAS also needs CUBLAS_WORKSPACE_CONFIG, set by paired() before CUDA starts
        torch.use_deterministic_algorithms(True, warn_only=True)
    dist.init_process_group("gloo", init_method=store, rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    models, optims = {}, {}
    first = build_model(model_name, image_size).to(device)
    from staged_before import LABEL as BEFORE, BeforeState, before_hook

    for mode in (*MODES, REFERENCE, BEFORE):
        net = DDP(copy.deepcopy(first), device_ids=[0] if on_gpu else None)
        if mode == REFERENCE:  # the price of any Python communication hook, for scale
            net.register_comm_hook(None, allreduce_hook)
        elif mode == BEFORE:  # the staged hook before issue 20 §3, for the before/after ratio
            net.register_comm_hook(BeforeState(), before_hook)
        else:
            register(net, *mode)
        name = mode if mode in (REFERENCE, BEFORE) else label(mode)
        models[name], optims[name] = net, torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(batch, 3, image_size, image_size, generator=g), torch.randint(0, 10, (batch,), generator=g)
    x, y = x.to(device), y.to(device)
    times: dict[str, list[float]] = {name: [] for name in models}
    names = list(models)
    for r in range(rounds + 2):  # the first two rounds build and settle DDP's buckets: not counted
        for name in names[r % len(names):] + names[:r % len(names)]:  # rotate: no mode always goes first
            dist.barrier()
            t0 = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(models[name](x), y)
            optims[name].zero_grad()
            loss.backward()
            optims[name].step()
            if on_gpu:
                torch.cuda.synchronize()
            if r >= 2:
                times[name].append(time.perf_counter() - t0)
    if rank == 0:
        params = sum(p.numel() for p in models[names[0]].parameters())
        native = list(models["native"].parameters())
        agreement = {name: {"identical": all(torch.equal(a, b) for a, b in zip(native, net.parameters())),
                            "max_abs_diff": max(float((a.detach() - b.detach()).abs().max()) for a, b in zip(native, net.parameters()))}
                     for name, net in models.items()}
        print(json.dumps({"model": model_name, "params": params, "times": times, "agreement": agreement,
                          "device": device, "deterministic": deterministic}), flush=True)
    dist.destroy_process_group()


def paired(models: list[str], rounds: int, batch: int, device: str = "cpu", deterministic: bool = False,
           sizes: dict[str, int] | None = None) -> dict:
    """Both ranks step native, staged and staged+fp16 copies in turn: load drift hits all three alike."""
    import tempfile

    sizes = {**PAIRED_MODELS, **(sizes or {})}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if deterministic:  # cuBLAS is deterministic only with a fixed workspace (torch's reproducibility notes)
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    out = {}
    for model in models:
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp, "store").as_uri()
            procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), store, model,
                                       str(sizes.get(model, 32)), str(rounds), str(batch), device,
                                       str(int(deterministic))],
                                      stdout=subprocess.PIPE, text=True, env=env)
                     for r in range(WORLD)]
            stdout = [p.communicate(timeout=1800)[0] for p in procs]
        if any(p.returncode for p in procs):
            print(f"{model}: a rank failed", file=sys.stderr)
            continue
        out[model] = json.loads(stdout[0].strip().splitlines()[-1])
        print(f"{model} measured", file=sys.stderr, flush=True)
    return out


def print_paired(results: dict, rounds: int, batch: int, device: str = "cpu") -> None:
    where = "sharing GPU 0" if device == "cuda" else "on the CPU"
    print(f"\nPaired: {WORLD} Gloo ranks {where}, batch {batch} per rank, one process per rank stepping a "
          f"native, a staged, a staged+fp16, a torch-allreduce_hook and a before-issue-20 staged DDP copy in turn, {rounds} rounds (median step time)")
    print("| model | parameters | exchange | step (ms) | samples/s | ratio to native | parameters vs native |\n"
          "|---|---|---|---|---|---|---|")
    for model, r in results.items():
        base = statistics.median(r["times"]["native"])
        for name, values in r["times"].items():
            step = statistics.median(values)
            agree = r["agreement"][name]
            same = "identical" if agree["identical"] else f"max diff {agree['max_abs_diff']:.2e}"
            print(f"| {model} | {r['params'] / 1e6:.1f} M | {name} | {step * 1000:.0f} | {WORLD * batch / step:.1f} "
                  f"| {base / step:.3f} | {same} |")


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--worker":
        rank, store, model, size, rounds, batch, device, deterministic = sys.argv[2:10]
        paired_worker(int(rank), store, model, int(size), int(rounds), int(batch), device, deterministic == "1")
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--paired", action="store_true", help="measure in two long-lived ranks instead of launches")
    p.add_argument("--rounds", type=int, default=20, help="--paired: measured rounds")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="--paired: where the models live (cuda: both ranks share GPU 0)")
    p.add_argument("--deterministic", action="store_true",
                   help="--paired: torch.use_deterministic_algorithms (warn-only) in both ranks")
    p.add_argument("--models", default="resnet18,vgg11")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    args = p.parse_args(argv)
    if args.paired:
        models = [m for m in args.models.split(",")]
        results_paired = paired(models, args.rounds, args.batch_size, args.device, args.deterministic)
        print_paired(results_paired, args.rounds, args.batch_size, args.device)
        if args.json:
            Path(args.json).write_text(json.dumps({"settings": vars(args), "paired": results_paired}, indent=2))
        return 0
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
