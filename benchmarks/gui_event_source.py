"""A stand-in launcher for benchmarks/gui_ingest.py: protocol events at a fixed rate on stdout.

    python benchmarks/gui_event_source.py --rate 2000 --seconds 30 [--ranks 2] [--burst-ms 20]

Speaks exactly what ``ddpstudio.core.launch.launcher`` writes (run_started,
rank_started, then per step: one ``step`` per rank, one ``global_step`` and
one rank ``log`` line, finally ``run_finished``), in bursts every
``--burst-ms`` as the launcher's 50 ms poll loop does. Stops early on a
"stop" line or EOF on stdin, like the launcher with --stdin-control.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time

from ddpstudio.core import protocol


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rate", type=float, default=2000.0, help="events per second")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--burst-ms", type=float, default=20.0)
    p.add_argument("--run-dir", default="")
    args = p.parse_args()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    out = sys.stdout
    per_step = args.ranks + 2
    total_steps = int(args.rate * args.seconds / per_step)

    def write(type_, **data):
        out.write(protocol.make_event(type_, **data).to_line() + "\n")

    write(protocol.RUN_STARTED, run_id="bench", run_dir=args.run_dir, world_size=args.ranks, backend="gloo",
          device="cpu", store="file", reasons=["benchmark event source"], max_steps=total_steps)
    for rank in range(args.ranks):
        write(protocol.RANK_STARTED, rank=rank, pid=os.getpid())
    out.flush()
    t0, step, sent = time.monotonic(), 0, 0
    while step < total_steps and not stop.is_set():
        due = int(min(args.seconds, time.monotonic() - t0) * args.rate)  # events that should be out by now
        while sent + per_step <= due and step < total_steps:
            step += 1
            loss = 2.0 * math.exp(-step / 5000) + 0.1 * math.sin(step / 7)
            for rank in range(args.ranks):
                write(protocol.STEP, rank=rank, step=step, epoch=0, loss=loss + 0.01 * rank, samples_per_s=500.0)
            write(protocol.GLOBAL_STEP, step=step, epoch=0, loss=loss, samples_per_s=1000.0,
                  total_steps=total_steps, lr=0.1 * (1 + math.cos(math.pi * step / total_steps)) / 2)
            if step % 200 == 0:  # as the recipe's --eval-every: the accuracy plot fills too
                write(protocol.EVAL, step=step, epoch=0, loss=loss, top1=1 - math.exp(-step / 3000),
                      top5=1 - math.exp(-step / 1000), samples=512)
            write(protocol.LOG, rank=step % args.ranks, stream="stdout", line=f"step {step} loss {loss:.4f}")
            sent += per_step
        out.flush()
        stop.wait(args.burst_ms / 1000)
    state = protocol.STOPPED if stop.is_set() else protocol.FINISHED
    write(protocol.RUN_FINISHED, state=state, duration_s=time.monotonic() - t0, root_cause=None, summary=None,
          run_dir=args.run_dir)
    out.flush()
    return protocol.EXIT_CODES[state]


if __name__ == "__main__":
    sys.exit(main())
