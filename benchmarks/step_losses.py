"""What the rank helper's step watch (rank/stepwatch.py, rank/steploss.py) adds to a training step.

    .venv/bin/python benchmarks/step_losses.py [--rounds 9] [--steps 5000]

Two loops, alternating in one process (one CPU thread), so that the machine's
drift hits both alike:

* ``step``: the cheapest real step, a 32x32 linear layer on a batch of 8,
  ``loss.backward()``, SGD's ``step()`` and ``zero_grad()`` (about the
  per-step Python work of benchmarks/plain/mlp.py without its Gloo
  all-reduce and printing);
* ``watch``: what the watch does per step of that loop, called as its taps
  call it: the backward tap's check and note of the loss, the DDP forward
  tap's batch count, and the optimizer hook's step (reports included: the
  first 50 steps each, then about 20 a second, written to a real events
  file in a temporary folder).

Timing the watch's own work, rather than a watched process against a bare
one, gives microseconds that the noise of two processes on a shared machine
(tens of microseconds a step) would hide. The table gives the median of
each and the watch as a share of the step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--steps", type=int, default=5000)
    args = p.parse_args()
    import torch
    from torch import nn

    from ddpstudio.rank.emit import Emitter
    from ddpstudio.rank.steploss import StepLosses

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Linear(32, 32)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 32)

    def step() -> torch.Tensor:
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    loss = step()
    with tempfile.TemporaryDirectory() as events:
        watch = StepLosses(Emitter(0, events), world_size=2)

        def watched() -> None:
            if loss.numel() == 1:  # the backward tap's own check
                watch.note(loss)
            watch.forwarded((x,), {})
            watch.optimizer_stepped(optimizer)

        times: dict[str, list[float]] = {"step": [], "watch": []}
        for i in range(args.rounds):
            for name, body in (("step", step), ("watch", watched))[:: 1 if i % 2 == 0 else -1]:
                start = time.perf_counter()
                for _ in range(args.steps):
                    body()
                times[name].append((time.perf_counter() - start) / args.steps * 1e6)
            print(f"[{i + 1}/{args.rounds}] step {times['step'][-1]:.1f} us, watch {times['watch'][-1]:.2f} us",
                  flush=True)
        reports = sum(1 for _ in open(os.path.join(events, "rank0.jsonl"), encoding="utf-8"))
    step_us, watch_us = statistics.median(times["step"]), statistics.median(times["watch"])
    print(f"\n{args.rounds} alternating rounds of {args.steps} steps, one CPU thread; {reports} reports written\n")
    print("| loop | us per step, median (min-max) | share of the step |")
    print("|---|---|---|")
    print(f"| the cheapest real step | {step_us:.1f} ({min(times['step']):.1f}-{max(times['step']):.1f}) | 1 |")
    print(f"| the watch's work for it | {watch_us:.2f} ({min(times['watch']):.2f}-{max(times['watch']):.2f}) "
          f"| {watch_us / step_us:.1%} |")


if __name__ == "__main__":
    main()
