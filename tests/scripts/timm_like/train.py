"""A script in the shape of timm's train.py: it takes torch.distributed.launch's --local_rank, leaves its
distributed set-up to a module of its own (dist_setup.py, as timm.utils), and prints each training and each
evaluation batch with AverageMeter's "value (average)", timm's format. Each rank writes, to --out/rank<N>.json,
the running average of each evaluation pass's last line: the evaluation a launcher should report.
"""

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist

from dist_setup import init_distributed

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--eval-batches", type=int, default=3)
p.add_argument("--local_rank", type=int, default=0)
p.add_argument("--out", default=".")


class Meter:
    def __init__(self) -> None:
        self.sum, self.count = 0.0, 0

    def update(self, value: float) -> float:
        self.sum, self.count = self.sum + value, self.count + 1
        return self.sum / self.count


def main() -> None:
    args = p.parse_args()
    init_distributed(args)
    torch.manual_seed(args.rank)
    w = torch.zeros(3, requires_grad=True)
    target = torch.tensor([2.0, -1.0, 0.5])
    evaluations = []
    for epoch in range(args.epochs):
        meter = Meter()
        for i in range(args.steps):
            x = torch.randn(8, 3)
            loss = ((x * (w - target)) ** 2).mean()
            w.grad = None
            loss.backward()
            if args.world_size > 1:
                dist.all_reduce(w.grad)
                w.grad /= args.world_size
            with torch.no_grad():  # SGD by hand: torch.optim would import torch._dynamo (seconds a rank)
                w.add_(w.grad, alpha=-0.1)
            average = meter.update(loss.item())
            print(f"Train: {epoch} [{i:>4d}/{args.steps} ({100 * i / args.steps:>3.0f}%)]  "
                  f"Loss: {loss.item():#.3g} ({average:#.3g})  LR: 1.000e-01", flush=True)
        meter = Meter()
        for i in range(args.eval_batches):
            with torch.no_grad():
                value = ((torch.randn(8, 3) * (w - target)) ** 2).mean().item()
            average = meter.update(value)
            print(f"Test: [{i:>4d}/{args.eval_batches - 1}]  Time: 0.010 (0.010)  Loss:  {value:>7.4f} "
                  f"({average:>6.4f})  Acc@1: 50.0000 (50.0000)", flush=True)
        evaluations.append(round(average, 4))
    Path(args.out, f"rank{args.rank}.json").write_text(json.dumps(evaluations), encoding="utf-8")
    if args.world_size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
