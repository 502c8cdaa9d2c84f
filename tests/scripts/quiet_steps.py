"""A torchrun-style script that prints no loss: its curve can only come from the rank helper (rank/steploss.py).

Each rank trains a small linear model on the CPU over Gloo and writes, to
``--out``/rank<N>.json, the loss of each step its optimizer really took (the
mean over the step's micro-batches, unscaled), which a test compares with the
run's ``step`` events. Options add what frameworks do around backward:
``--accumulate K`` (K backward passes per step, each on loss / K, as
Lightning, Accelerate and the Trainer do), ``--scaler`` (a GradScaler, whose
backward runs on the scaled loss; ``--scaler sharded``: FSDP's ShardedGradScaler,
which scales by itself and is made after the process group exists), ``--inf-at N`` (iteration N's gradients are
infinite: the scaler skips that step), ``--second-optimizer`` (a second model
and optimizer stepped after the first, as a GAN's generator), ``--two-views``
(the batch forwarded twice for one loss), ``--report``
(the script reports its own steps through ``ddpstudio.report``, 0-based), ``--wrapper-eval`` (the DDP
wrapper in eval mode around a module that trains, as Lightning 2.6.6 leaves it), ``--eval-at N`` (an evaluation
line, ``val_loss``, printed after iteration N's step and read with the fast steps after it).
"""

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
p.add_argument("--accumulate", type=int, default=1)
p.add_argument("--scaler", nargs="?", const="amp", choices=("amp", "sharded"))
p.add_argument("--inf-at", type=int, default=0)
p.add_argument("--second-optimizer", action="store_true")
p.add_argument("--two-views", action="store_true")
p.add_argument("--report", action="store_true")
p.add_argument("--wrapper-eval", action="store_true")
p.add_argument("--eval-at", type=int, default=0)
p.add_argument("--out", required=True)


def main() -> None:
    args = p.parse_args()
    if args.report:
        from ddpstudio import report  # imported before training, as a script written for DDP Studio does
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
    if args.wrapper_eval:  # Lightning trains the module inside a DDP whose own flag it never sets
        model.training = False
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    if args.scaler == "sharded":  # FSDP's, which scales by itself (and agrees on a skipped step over the group)
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        scaler = ShardedGradScaler("cpu", init_scale=1024.0)
    else:
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, enabled=args.scaler is not None)
    other = nn.Linear(8, 1)
    other_optimizer = torch.optim.SGD(other.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(rank)
    taken = []
    for iteration in range(1, args.steps + 1):
        micro = []
        for _ in range(args.accumulate):
            x = torch.randn(16, 8, generator=generator)
            loss = ((model(x) - x.sum(1, keepdim=True) * (rank + 1)) ** 2).mean()
            if args.two_views:  # the same batch forwarded twice for one loss, as contrastive training does
                loss = (loss + ((model(x * 0.5) - x.sum(1, keepdim=True) * (rank + 1)) ** 2).mean()) / 2
            micro.append(loss.item())
            if iteration == args.inf_at:
                loss = loss * float("inf")
            scaler.scale(loss / args.accumulate).backward()
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        if not (args.scaler is not None and scaler.get_scale() < scale):  # the scaler backs off after a skipped step
            taken.append(sum(micro) / len(micro))
            if args.report:
                report.step(len(taken) - 1, taken[-1] + 1000.0)  # its own numbering and values: told apart
        if iteration == args.eval_at:
            print(f"rank {rank} val_loss {0.25 + rank:.4f}", flush=True)
        if args.second_optimizer:
            other_loss = (other(torch.randn(4, 8, generator=generator)) ** 2).mean() + 500.0
            other_loss.backward()
            other_optimizer.step()
            other_optimizer.zero_grad()
    Path(args.out, f"rank{rank}.json").write_text(json.dumps(taken), encoding="utf-8")
    print(f"rank {rank} done: {len(taken)} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
