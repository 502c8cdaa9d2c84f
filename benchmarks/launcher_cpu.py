"""Where the CPU goes in a run of a plain script: the front (CLI or torchrun), the launcher, each rank (issue 20).

    .venv/bin/python benchmarks/launcher_cpu.py [--rounds 3] [--jobs silent,print,mlp] [--tree DIR ...]
        [--kinds torchrun,helper,no-helper] [--json out.json]

Wall-clock steps/s on a shared 2-core machine is noise (benchmarks/plain_scripts.py
says so); CPU seconds are not. A script that knows nothing of DDP Studio (2 Gloo
ranks, env:// rendezvous, as users write them) runs three jobs:

* ``silent``: joins the group, sleeps ``--seconds``, prints nothing (one loss line first, so the run
  ends "finished");
* ``print``: the same, printing ``step {i} loss {x:.4f}`` at ``--rate`` lines/s per rank;
* ``mlp``: benchmarks/plain/mlp.py's loop (loss printed every step), ``--steps`` steps, a tenth warm-up.

under ``torchrun``, ``ddpstudio run`` (the rank helper on) and ``ddpstudio run
--no-rank-helper``, in rotating rounds (``--tree``: each checkout's studio kinds in the
same rounds, before and after a change). Only the timed part counts, from a barrier
(after the warm-up in ``mlp``) to the end of the job, so start-up and teardown are
left out. Over it, with no sampling:

* rank 0 reads the own CPU (user + system) of its parent and grandparent from
  ``/proc/PID/stat`` (Linux): torchrun's agent, or the launcher and the CLI above it;
* each rank adds its own ``time.process_time()`` (every thread of the rank, the
  helper's included).

Reported, medians (min-max) over rounds: the front's (CLI, torchrun) and the
launcher's CPU seconds per wall second; (print - silent) per printed line, front and
launcher together (us/line); the ranks' CPU per second and, in ``mlp``, per step (us).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from overhead import _tool  # noqa: E402

# The user's script: its own CPU and the steady part's, per rank, to $CPU_DIR/rank<R>.json after it ends.
SCRIPT = '''import json, os, resource, sys, time
import torch, torch.distributed as dist, torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
TICK = os.sysconf("SC_CLK_TCK")


def stat(pid):  # (parent pid, own user+system CPU seconds) from /proc/PID/stat
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def outside():  # own CPU seconds of this rank's parent (launcher, torchrun) and grandparent (CLI)
    up, parent = stat(os.getppid())
    return [parent, stat(up)[1]]


job, n = sys.argv[1], float(sys.argv[2])
dist.init_process_group("gloo")
print("step 0 loss: 1.0", flush=True)  # trained: the run ends "finished", whatever the job
dist.barrier()
wall0, cpu0, around0, steps = time.perf_counter(), time.process_time(), outside(), 0
if job == "silent":
    time.sleep(n)
elif job == "print":
    rate, x, i = float(sys.argv[3]), 2.5, 0
    while i < n * rate:
        ahead = wall0 + i / rate - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)
        x *= 0.9999
        print(f"step {i} loss {x:.4f}")
        i += 1
else:
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    warm = int(n) // 10
    for step in range(1, int(n) + 1):
        if step == warm + 1:
            wall0, cpu0, around0 = time.perf_counter(), time.process_time(), outside()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss: {loss.item():.4f}")
    steps = int(n) - warm
wall, loop_cpu, around = time.perf_counter() - wall0, time.process_time() - cpu0, outside()
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
use = resource.getrusage(resource.RUSAGE_SELF)
with open(os.path.join(os.environ["CPU_DIR"], "rank%s.json" % os.environ["RANK"]), "w") as f:
    json.dump({"cpu_s": use.ru_utime + use.ru_stime, "loop_cpu_s": loop_cpu, "loop_wall_s": wall, "steps": steps,
               "parent_cpu_s": around[0] - around0[0], "grandparent_cpu_s": around[1] - around0[1]}, f)
'''
KINDS = ("torchrun", "helper", "no-helper")


def command(kind: str, script: Path, args: list[str], port: int) -> list[str]:
    if kind == "torchrun":
        return _tool("torchrun", "torch.distributed.run") + [
            "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port), str(script), *args]
    return _tool("ddpstudio", "ddpstudio") + [
        "run", "--world-size", "2", "--script", str(script), "--script-style", "env",
        *(["--no-rank-helper"] if kind == "no-helper" else []), "--", *args]


def launch(kind: str, tree: Path | None, job: list[str], work: Path, timeout: float) -> dict:
    """One launch to its end: what rank 0 read of the processes above it, and both ranks' own figures."""
    from ddpstudio.core.rendezvous.ports import find_free_port

    cpu_dir = Path(tempfile.mkdtemp(dir=work))
    env = dict(os.environ, CPU_DIR=str(cpu_dir), DDPSTUDIO_HOME=str(work / "home"))
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    with open(cpu_dir / "out.log", "w", encoding="utf-8") as out:
        proc = subprocess.Popen(command(kind, work / "job.py", job, find_free_port()), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            proc.wait(timeout)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} {job} exited {proc.returncode}: {(cpu_dir / 'out.log').read_text()[-2000:]}")
    ranks = [json.loads((cpu_dir / f"rank{r}.json").read_text()) for r in range(2)]
    shutil.rmtree(cpu_dir, ignore_errors=True)
    first = ranks[0]
    # torchrun: the rank's parent is torchrun itself; ddpstudio run: the launcher, below the CLI.
    front, launcher = ((first["parent_cpu_s"], 0.0) if kind == "torchrun"
                       else (first["grandparent_cpu_s"], first["parent_cpu_s"]))
    return {"wall_s": first["loop_wall_s"], "front_cpu_s": front, "launcher_cpu_s": launcher,
            "loop_cpu_s": sum(r["loop_cpu_s"] for r in ranks), "steps": first["steps"], "load": os.getloadavg()[0]}


def jobs(args: argparse.Namespace) -> dict[str, list[str]]:
    return {"silent": ["silent", str(args.seconds)], "print": ["print", str(args.seconds), str(args.rate)],
            "mlp": ["mlp", str(args.steps)]}


def _median(values: list[float], digits: int = 3) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(found: dict, args: argparse.Namespace) -> str:
    """Per launch and job: CPU-s per wall second (front, launcher, ranks), us per printed line, rank us per step."""
    rows = ["| launch | job | front CPU-s/s | launcher CPU-s/s | front + launcher us/line | ranks' CPU-s/s | "
            "ranks' CPU us/step (both) | load |", "|---|---|---|---|---|---|---|---|"]
    lines_per_s = args.rate * 2
    for (name, job), got in found.items():
        per_s = lambda key: [g[key] / g["wall_s"] for g in got]  # noqa: E731
        per_line = step = "-"
        if job == "print" and (name, "silent") in found:
            quiet = found[(name, "silent")]
            outside = lambda g: (g["front_cpu_s"] + g["launcher_cpu_s"]) / g["wall_s"]  # noqa: E731
            per_line = _median([(outside(g) - outside(q)) / lines_per_s * 1e6 for g, q in zip(got, quiet)], 1)
        if job == "mlp":
            step = _median([g["loop_cpu_s"] / g["steps"] * 1e6 for g in got], 0)
        rows.append(f"| {name} | {job} | {_median(per_s('front_cpu_s'))} | {_median(per_s('launcher_cpu_s'))} | "
                    f"{per_line} | {_median(per_s('loop_cpu_s'))} | {step} | "
                    f"{min(g['load'] for g in got):.1f}-{max(g['load'] for g in got):.1f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", default="silent,print,mlp")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--seconds", type=float, default=10.0, help="length of the silent and print jobs")
    p.add_argument("--rate", type=float, default=300.0, help="lines/s per rank in the print job (default 300)")
    p.add_argument("--steps", type=int, default=3000, help="steps of the mlp job (a tenth of them warm-up)")
    p.add_argument("--tree", action="append", type=Path, metavar="DIR",
                   help="a checkout whose ddpstudio runs the studio kinds (repeatable; default this one)")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    trees = [t.resolve() for t in args.tree] if args.tree else [None]
    kinds = [k for k in args.kinds.split(",") if k]
    launches = [(k, None) for k in kinds if k == "torchrun"] + [(k, t) for t in trees for k in kinds if k != "torchrun"]
    work = Path(tempfile.mkdtemp(prefix="ddpstudio-cpu-"))
    (work / "job.py").write_text(SCRIPT, encoding="utf-8")
    todo = jobs(args)
    names = [j for j in args.jobs.split(",") if j]
    found: dict = {}
    try:
        for rnd in range(args.rounds):
            order = launches[rnd % len(launches):] + launches[:rnd % len(launches)]
            for job in names:
                for kind, tree in order:
                    name = kind if tree is None or len(trees) < 2 else f"{kind}, {tree.name}"
                    got = launch(kind, tree, todo[job], work, args.timeout)
                    found.setdefault((name, job), []).append(got)
                    print(f"[{rnd + 1}/{args.rounds}] {name} {job}: front {got['front_cpu_s']:.2f} s, launcher "
                          f"{got['launcher_cpu_s']:.2f} s, ranks {got['loop_cpu_s']:.2f} s in {got['wall_s']:.1f} s, "
                          f"load {got['load']:.1f}",
                          file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n2 Gloo ranks on the CPU, {args.rounds} rotating rounds, medians (min-max); silent/print "
          f"{args.seconds:g} s, print {args.rate:g} lines/s per rank, mlp {args.steps} steps; {os.cpu_count()} CPUs\n")
    print(table(dict(sorted(found.items(), key=lambda kv: (names.index(kv[0][1]), kv[0][0]))), args))
    if args.json:
        Path(args.json).write_text(json.dumps([{"launch": n, "job": j, "runs": g} for (n, j), g in found.items()],
                                              indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
