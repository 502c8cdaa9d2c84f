"""Where the recipe loses to the tight loop: one ingredient added per rung, all timed in one process (issue 20 §2).

    python3 benchmarks/recipe_ladder.py [--cpu] [--rounds 3] [--steps 30]

``gpu.py`` compares the recipe (a launched rank, timed from its step events) with
the same model in a tight loop; when the ratio falls short, this says which part
of the recipe's step costs what. Every rung is the tight loop plus one thing the
recipe does, each its own copy of the model, stepped ``--steps`` times per round
with the device synchronised at both ends, in rotating order over ``--rounds``
rounds (the median counts):

* ``tight loop``: the model on one batch already on the device, the recipe's precision (as gpu.py's ceiling);
* ``DDP, <backend>``: wrapped as the recipe wraps it, one rank (NCCL on a GPU, Gloo everywhere);
* ``DDP, Gloo, staged``: the staged exchange's hook (rank/staged.py) on the Gloo group;
* ``DDP, one rank, solo hook``: what ``staged`` registers for one rank (rank/staged.py ``solo_hook``);
* ``DDP + synthetic batches``: the recipe's data, built on the device per step from the loader's indices
  (rank/data.py), in channels_last where the recipe uses it: indices in pinned memory (the recipe's loader
  pins them) and, for comparison, in pageable memory (as it did before: each copy waited for the queue).

One process, one rank: the process group lives on a FileStore in a temporary folder.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GPU_MODELS = (("resnet18", 32, 64), ("resnet50", 224, 64))
CPU_MODELS = (("resnet18", 32, 8),)


def rungs(model_name: str, size: int, batch: int, device: str, gloo) -> dict:
    """name -> (model, data function): the recipe's pieces, one more per rung."""
    import torch
    import torch.distributed as dist
    import torchvision
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddpstudio.rank import precision
    from ddpstudio.rank.data import SyntheticImages
    from ddpstudio.rank.staged import StagedState, solo_hook, staged_hook

    dev = torch.device(device)
    base = torchvision.models.get_model(model_name, weights=None, num_classes=10).to(dev)
    chosen = precision.for_model(base, dev.type, True)
    if chosen.channels_last:
        base = base.to(memory_format=torch.channels_last)
    x = torch.randn(batch, 3, size, size, device=dev)
    if chosen.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=dev)
    fixed = lambda: (x, y)  # noqa: E731

    synthetic = SyntheticImages(4096, 10, size)
    order = torch.randperm(4096)
    cursor = [0]

    def synthetic_batch(pinned: bool):
        start = cursor[0] % (4096 - batch)
        cursor[0] += batch
        indices = order[start:start + batch]
        labels = indices % 10
        if pinned and dev.type == "cuda":
            indices, labels = indices.pin_memory(), labels.pin_memory()
        labels = labels.to(dev, non_blocking=True)
        images = synthetic.batch(indices.to(dev, non_blocking=True))
        if chosen.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return images, labels

    def ddp(group=None, hook=None, state=None):
        net = DDP(copy.deepcopy(base), device_ids=[0] if dev.type == "cuda" else None, process_group=group,
                  gradient_as_bucket_view=True, broadcast_buffers=False)
        if hook is not None:
            net.register_comm_hook(state, hook)
        return net

    default = dist.get_backend()
    out = {"tight loop": (copy.deepcopy(base), fixed), f"DDP, {default}": (ddp(), fixed)}
    if default != "gloo":
        out["DDP, gloo"] = (ddp(gloo), fixed)
    if dev.type == "cuda":
        out["DDP, gloo, staged"] = (ddp(gloo, staged_hook, StagedState(gloo)), fixed)
    out["DDP, one rank, solo hook"] = (ddp(hook=solo_hook), fixed)
    out[f"DDP, {default} + synthetic batches"] = (ddp(), lambda: synthetic_batch(True))
    if dev.type == "cuda":
        out[f"DDP, {default} + synthetic batches, pageable indices"] = (ddp(), lambda: synthetic_batch(False))
    return out, chosen


def measure(model_name: str, size: int, batch: int, device: str, rounds: int, steps: int, gloo) -> list[dict]:
    import torch

    ladder, chosen = rungs(model_name, size, batch, device, gloo)
    dtype = getattr(torch, chosen.autocast) if chosen.autocast else None
    loss_fn = torch.nn.CrossEntropyLoss()
    steppers = {}
    for name, (model, data) in ladder.items():
        opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
        scaler = torch.amp.GradScaler("cuda", enabled=chosen.grad_scaler)

        def step(model=model, data=data, opt=opt, scaler=scaler):
            images, labels = data()
            with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
                loss = loss_fn(model(images), labels)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

        steppers[name] = step
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    names = list(steppers)
    for name in names:  # warm-up: cuDNN's choices, DDP's bucket rebuild, the synthetic pools on the device
        for _ in range(5):
            steppers[name]()
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            sync()
            t0 = time.perf_counter()
            for _ in range(steps):
                steppers[name]()
            sync()
            rates[name].append(batch * steps / (time.perf_counter() - t0))
    top = statistics.median(rates["tight loop"])
    return [{"model": f"{model_name} {size} px, batch {batch}, {chosen.name}", "rung": name,
             "samples_s": statistics.median(v), "ratio": statistics.median(v) / top,
             "spread": (min(v) / top, max(v) / top)} for name, v in rates.items()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="the CPU form (one small model) even where CUDA is there")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, help="steps per rung and round (default 30 on a GPU, 3 on the CPU)")
    args = p.parse_args(argv)

    import torch
    import torch.distributed as dist

    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    steps = args.steps or (30 if device == "cuda" else 3)
    if device == "cpu":
        torch.set_num_threads(1)  # the recipe's one thread per rank on the CPU
    else:
        torch.cuda.set_device(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp, "store").as_uri()
        dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=store, rank=0, world_size=1)
        gloo = dist.new_group(backend="gloo") if device == "cuda" else None
        try:
            for model, size, batch in (GPU_MODELS if device == "cuda" else CPU_MODELS):
                print(f"{model} ...", file=sys.stderr, flush=True)
                rows += measure(model, size, batch, device, args.rounds, steps, gloo)
        finally:
            dist.destroy_process_group()
    where = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (one thread)"
    print(f"\nRecipe ladder on {where}, torch {torch.__version__}: {steps} steps x {args.rounds} rotating rounds "
          "per rung, median samples/s, ratio to the tight loop (min-max over rounds)\n")
    print("| model | rung | samples/s | ratio | spread |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['rung']} | {r['samples_s']:,.1f} | {r['ratio']:.3f} "
              f"| {r['spread'][0]:.3f}-{r['spread'][1]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
