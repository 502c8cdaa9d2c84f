"""What the rank helper costs a user's script: step time (and start-up) with the helper on and off, paired.

    .venv/bin/python benchmarks/rank_helper.py [--repeats 5] [--steps 30] [--warmup 5] [--model mlp|resnet18]

A small real DDP script (2 Gloo ranks on the CPU, one thread each; an MLP or
resnet18 at 32x32, batch 16 per rank) is launched through ``ddpstudio run
--script`` twice at the same time, side by side, one with the rank helper and
one with ``--no-rank-helper`` (which starts first alternates), so the load
of a shared machine at that moment weighs on both alike. The script times its own steps (``time.perf_counter`` around forward,
backward, all-reduce and optimizer step, after a barrier) and its own
``import torch`` and ``init_process_group``, which is where the helper does
its work (the wrappers are installed while torch imports; ``rank_watched``
and ``rank_joined`` are one line each). The table gives rank 0's median step
time per launch, and its CPU time per step (``time.process_time``, which a
busy machine's scheduling disturbs far less than wall time), the per-pair
ratios on/off and their medians over the pairs.

The paired ratio resolves only a few percent on a busy machine, so each
helper-on launch also counts the helper's cost directly: the calls into DDP
Studio's code during a training step (a profiler over 5 extra steps) and the
CPU time of DDP Studio's own threads in the rank (per-thread CPU clocks, to the
nanosecond) against the training thread's, over the measured steps.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ddpstudio.core import protocol  # noqa: E402

SCRIPT = r'''
import os, sys, time
t0 = time.perf_counter()
import torch
import torch.distributed as dist
t_import = time.perf_counter() - t0
torch.set_num_threads(1)
model_name, steps = sys.argv[1], int(sys.argv[2])
warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 0
# A GPU when the launcher gives one (NCCL, one device per rank), as a plain torchrun script does.
cuda = torch.cuda.is_available()
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)
t1 = time.perf_counter()
dist.init_process_group("nccl" if cuda else "gloo", init_method="env://")
t_init = time.perf_counter() - t1
torch.manual_seed(0)
if model_name == "mlp":
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
else:
    import torchvision
    net = torchvision.models.get_model(model_name, weights=None, num_classes=10)
model = torch.nn.parallel.DistributedDataParallel(net.to(device), device_ids=[device.index] if cuda else None)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
g = torch.Generator().manual_seed(dist.get_rank())
x, y = torch.randn(16, 3, 32, 32, generator=g).to(device), torch.randint(0, 10, (16,), generator=g).to(device)
print(f"startup import_ms: {t_import * 1000:.1f} init_ms: {t_init * 1000:.1f}", flush=True)
import threading


def ours():
    """CPU seconds of the DDP Studio threads in this process (the stop watcher, the lifeline), each to the ns."""
    return sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in threading.enumerate()
               if t.name.startswith("ddpstudio-") and t.is_alive())


def train_step():
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()  # the host waits for the step here, as a script that prints its loss does


helper_cpu0, main_cpu0 = ours(), time.thread_time()
for step in range(1, steps + 1):
    if step == warmup + 1:
        loop_start = time.perf_counter()
    dist.barrier()
    s, c = time.perf_counter(), time.process_time()
    loss = train_step()
    wall, cpu = (time.perf_counter() - s) * 1000, (time.process_time() - c) * 1000
    print(f"step {step} loss: {loss:.4f} step_ms: {wall:.3f} cpu_ms: {cpu:.3f}", flush=True)
# The whole measured loop, printing included: where a launcher that reads the output slowly shows.
print(f"loop steps_per_s: {(steps - warmup) / (time.perf_counter() - loop_start):.3f}", flush=True)
helper_cpu, main_cpu = ours() - helper_cpu0, time.thread_time() - main_cpu0
# Then a few steps under a profiler that counts every Python call into DDP Studio's code (wrappers, hooks),
# in this thread and any other; the profiler's own cost is not timed.
package = os.sep + "ddpstudio" + os.sep
calls = [0]


def count(frame, event, arg):
    if event == "call" and package in frame.f_code.co_filename:
        calls[0] += 1


threading.setprofile(count)
sys.setprofile(count)
for _ in range(5):
    dist.barrier()
    train_step()
sys.setprofile(None)
threading.setprofile(None)
print(f"accounting helper_thread_cpu_ms: {helper_cpu * 1000:.4f} main_thread_cpu_ms: {main_cpu * 1000:.1f} "
      f"helper_calls_per_step: {calls[0] / 5:.1f}", flush=True)
dist.destroy_process_group()
'''
_STEP = re.compile(r"step_ms: ([0-9.]+) cpu_ms: ([0-9.]+)")
_START = re.compile(r"import_ms: ([0-9.]+) init_ms: ([0-9.]+)")
_LOOP = re.compile(r"loop steps_per_s: ([0-9.]+)")
_ACCOUNT = re.compile(r"helper_thread_cpu_ms: ([0-9.]+) main_thread_cpu_ms: ([0-9.]+) helper_calls_per_step: ([0-9.]+)")


def script_args(args: argparse.Namespace) -> list[str]:
    """The script's own arguments: model, steps in all, warm-up steps."""
    return [args.model, str(args.warmup + args.steps), str(args.warmup)]


def start(script: Path, helper: bool, args: argparse.Namespace) -> subprocess.Popen:
    """One run through the CLI, started in the background."""
    cmd = [sys.executable, "-m", "ddpstudio", "run", "--json", "--world-size", str(getattr(args, "world_size", 2)),
           "--script", str(script), "--script-style", "env", *([] if helper else ["--no-rank-helper"]), "--",
           *script_args(args)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})


def result(proc: subprocess.Popen, helper: bool, args: argparse.Namespace) -> dict | None:
    """Rank 0's median step time (after the warm-up) and its start-up times, or None if the run failed."""
    stdout, stderr = proc.communicate(timeout=900)
    parser = protocol.EventParser()
    lines = [ev.get("line", "") for line in stdout.splitlines() for ev in parser.feed(line)
             if ev.type == protocol.LOG and ev.rank == 0 and ev.get("stream") == "stdout"]
    if proc.returncode != 0:
        print(f"  helper {'on' if helper else 'off'} failed (exit {proc.returncode}): {stderr[-300:]}",
              file=sys.stderr)
        return None
    steps = [m for line in lines if (m := _STEP.search(line))][args.warmup:]
    start_up = next(m for line in lines if (m := _START.search(line)))
    account = next(m for line in lines if (m := _ACCOUNT.search(line)))
    assert ('"type":"rank_watched"' in stdout) == helper, "the helper switch did not do what it says"
    loop = next(m for line in lines if (m := _LOOP.search(line)))
    return {"step_ms": statistics.median(float(m.group(1)) for m in steps), "steps_per_s": float(loop.group(1)),
            "cpu_ms": statistics.median(float(m.group(2)) for m in steps), "import_ms": float(start_up.group(1)),
            "init_ms": float(start_up.group(2)), "helper_thread_ms": float(account.group(1)),
            "main_thread_ms": float(account.group(2)), "calls_per_step": float(account.group(3))}


def _per_step_share(run: dict, args: argparse.Namespace) -> float:
    """The helper threads' CPU time per step (over every step, warm-up included) over the median step time."""
    return run["helper_thread_ms"] / (args.warmup + args.steps) / run["step_ms"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="pairs of launches (on and off side by side)")
    p.add_argument("--steps", type=int, default=30, help="measured steps per launch")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--model", default="mlp", help="mlp, or a torchvision model such as resnet18")
    args = p.parse_args(argv)
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp, "ddp_bench_script.py")
        script.write_text(SCRIPT, encoding="utf-8")
        for i in range(args.repeats):
            order = (True, False) if i % 2 == 0 else (False, True)
            # Side by side: both runs at once, so the machine's load at that moment weighs on both alike.
            procs = {helper: start(script, helper, args) for helper in order}
            got = {helper: result(proc, helper, args) for helper, proc in procs.items()}
            if None in got.values():
                continue
            pairs.append(got)
            print(f"pair {i + 1}: on {got[True]['step_ms']:.2f} ms ({got[True]['cpu_ms']:.2f} CPU), "
                  f"off {got[False]['step_ms']:.2f} ms ({got[False]['cpu_ms']:.2f} CPU)",
                  file=sys.stderr, flush=True)
    print(f"\n{args.model}, 2 ranks, Gloo on the CPU, batch 16 per rank, 32x32, {args.steps} measured steps after "
          f"{args.warmup}, rank 0's median step time per launch; {len(pairs)} pairs, each pair side by side")
    print("| pair | step on/off (ms) | ratio | CPU per step on/off (ms) | ratio | import torch on/off (ms) "
          "| init on/off (ms) | helper calls per step | helper threads' CPU / training thread's "
          "| helper threads' CPU per step / step time |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, pair in enumerate(pairs, 1):
        on, off = pair[True], pair[False]
        print(f"| {i} | {on['step_ms']:.2f} / {off['step_ms']:.2f} | {on['step_ms'] / off['step_ms']:.3f} | "
              f"{on['cpu_ms']:.2f} / {off['cpu_ms']:.2f} | {on['cpu_ms'] / off['cpu_ms']:.3f} | "
              f"{on['import_ms']:.0f} / {off['import_ms']:.0f} | {on['init_ms']:.0f} / {off['init_ms']:.0f} | "
              f"{on['calls_per_step']:g} | {100 * on['helper_thread_ms'] / on['main_thread_ms']:.3f}% | "
              f"{100 * _per_step_share(on, args):.4f}% |")
    if pairs:
        wall = statistics.median(p[True]["step_ms"] / p[False]["step_ms"] for p in pairs)
        cpu = statistics.median(p[True]["cpu_ms"] / p[False]["cpu_ms"] for p in pairs)
        imp = statistics.median(p[True]["import_ms"] - p[False]["import_ms"] for p in pairs)
        print(f"\nmedian ratio on/off over the pairs: step time {wall:.4f} ({100 * (wall - 1):+.2f}%), "
              f"CPU time per step {cpu:.4f} ({100 * (cpu - 1):+.2f}%); "
              f"median extra import time with the helper: {imp:+.0f} ms (once per rank)")
        on = [p[True] for p in pairs]
        share = max(100 * r["helper_thread_ms"] / r["main_thread_ms"] for r in on)
        per_step = max(100 * _per_step_share(r, args) for r in on)
        calls = max(r["calls_per_step"] for r in on)
        print("\nCounted directly in each helper-on launch (rank 0; not disturbed by the machine's load): "
              f"calls into DDP Studio code per training step, at most {calls:g}; CPU time of DDP Studio's "
              f"own threads (stop watcher, lifeline) over the steps, at most {share:.4f}% of the training "
              f"thread's CPU time and at most {per_step:.4f}% of the step time")
    return 0 if pairs else 1


if __name__ == "__main__":
    sys.exit(main())
