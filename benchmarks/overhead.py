"""DDP Studio's launch overhead against torchrun: the same training, side by side, in one run.

    .venv/bin/python benchmarks/overhead.py [--repeats 3] [--steps 30] [--warmup 5] [--json out.json]

Three ways to launch one training, alternating (run, launcher, torchrun, run,
...) so that drift on a shared machine hits all of them alike:

* ``run``: the command line, ``ddpstudio run ... --world-size 2 --json``
  (parses, validates, detects GPUs, plans, then starts the launcher);
* ``launcher``: ``python -m ddpstudio.core.launch.launcher PLAN.json``, what the window
  starts when Launch is pressed (its checks ran while the form was filled in);
* ``torchrun``: ``torchrun --nproc-per-node 2 -m ddpstudio.rank.recipe PLAN.json
  --init-method env://`` on a plan built from the very same ``ddpstudio run``
  arguments.

All are measured the same way, from the recipe's own per-rank event files
(``DDPSTUDIO_EVENTS_DIR`` is set for torchrun): steady-state samples/s from rank
0's step stamps after the warm-up, and time to first step from the moment the
command was started to rank 0's first step event. The script also checks that
the launches really run the same thing: the recipe, backend, device and
environment fields of the plans, the ranks' command lines, and the ranks'
environments (read from the live processes with psutil); it prints any
difference.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ddpstudio.core.bench.timing import (measured_step_times, rank0_step_stamps,  # noqa: E402
                                         read_rank_events, throughput)

KINDS = ("run", "launcher", "torchrun")
LABELS = {"run": "ddpstudio run", "launcher": "DDP Studio launcher", "torchrun": "torchrun"}
# Variables a launcher sets for its own bookkeeping: expected to differ, never read by the recipe.
BOOKKEEPING = ("MASTER_PORT", "DDPSTUDIO_EVENTS_DIR", "DDPSTUDIO_RUN_ID", "TORCHELASTIC_", "TORCH_NCCL_",
               "GROUP_WORLD_SIZE", "ROLE_", "TORCHINDUCTOR_CACHE_DIR")
# Shown as evidence: what every rank must share, whoever launched it.
SHOWN = ("OMP_NUM_THREADS", "GLOO_SOCKET_IFNAME", "PYTHONUNBUFFERED", "MASTER_ADDR", "WORLD_SIZE",
         "LOCAL_WORLD_SIZE", "USE_LIBUV", "CUDA_VISIBLE_DEVICES")


@dataclass
class Launch:
    kind: str
    repeat: int
    plan_path: str = ""
    samples_per_s: float | None = None  # samples x steps / total measured time
    samples_per_s_median: float | None = None  # samples / median step time: robust to bursts of load
    step_time_ms: float | None = None
    time_to_first_step_s: float | None = None
    wall_s: float | None = None
    returncode: int | None = None
    launcher_cpu_s: float = 0.0  # CPU used by every process in the tree that is not a rank
    rank_cpu_s: float = 0.0
    load: float | None = None  # the machine's mean 1-minute load average during the launch
    ranks_start_s: float | None = None  # command start to the first rank process's creation
    launcher_busy_pct: float | None = None  # launcher-side CPU while the measured steps ran, % of one core
    rank_cpu_ms_per_step: float | None = None  # ranks' CPU per measured step: the same work, whoever launched
    # (wall time, launcher-side CPU s, ranks' CPU s), every 0.1 s
    cpu_timeline: list[tuple[float, float, float]] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)
    rank_env: dict[str, dict[str, str]] = field(default_factory=dict)  # rank -> environment
    rank_cmd: dict[str, list[str]] = field(default_factory=dict)


def run_argv(args: argparse.Namespace) -> list[str]:
    """The ``ddpstudio run`` arguments every launch is built from."""
    return ["run", "--model", args.model, "--batch-size", str(args.batch_size), "--image-size",
            str(args.image_size), "--max-steps", str(args.warmup + args.steps), "--world-size",
            str(args.world_size), "--json"]


def build_plan_for(argv: list[str]):
    """The plan ``ddpstudio run`` builds from ``argv`` (a fresh run id each call); not written yet."""
    from ddpstudio.cli.main import _parser
    from ddpstudio.cli.run import build_request
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import build_plan

    return build_plan(build_request(_parser().parse_args(argv)), current(), detect_inventory())


# -- one launch --------------------------------------------------------------------

def _tree(proc: subprocess.Popen) -> list[psutil.Process]:
    try:
        top = psutil.Process(proc.pid)
        return [top, *top.children(recursive=True)]
    except psutil.Error:
        return []


def _watch(proc: subprocess.Popen, launch: Launch, world_size: int, timeout: float) -> None:
    """Wait for the launch to end; meanwhile read each rank's environment and command line once,
    the CPU time of every process in the tree (last reading before it exits), and the load."""
    deadline = time.time() + timeout
    cpu: dict[int, float] = {}
    ranks: set[int] = set()  # sticky: right after fork a rank still shows its parent's command line
    loads = []
    created = float("inf")
    try:
        top_created = psutil.Process(proc.pid).create_time()
    except psutil.Error:
        top_created = None
    while proc.poll() is None:
        loads.append(os.getloadavg()[0])
        for p in _tree(proc):
            try:
                # torchrun's own command line names the module too: the top process is never a rank
                if p.pid != proc.pid and p.pid not in ranks and "ddpstudio.rank.recipe" in " ".join(p.cmdline()):
                    ranks.add(p.pid)
                    created = min(created, p.create_time())
                times = p.cpu_times()
                cpu[p.pid] = times.user + times.system
                if p.pid in ranks and len(launch.rank_env) < world_size:
                    env = p.environ()
                    if "RANK" in env and env["RANK"] not in launch.rank_env:
                        launch.rank_env[env["RANK"]] = env
                        launch.rank_cmd[env["RANK"]] = p.cmdline()
            except psutil.Error:
                continue
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RuntimeError(f"{LABELS[launch.kind]} did not finish within {timeout:.0f} s")
        launch.cpu_timeline.append((time.time(), sum(t for q, t in cpu.items() if q not in ranks),
                                    sum(t for q, t in cpu.items() if q in ranks)))
        time.sleep(0.1)
    launch.rank_cpu_s = sum(t for pid, t in cpu.items() if pid in ranks)
    launch.launcher_cpu_s = sum(t for pid, t in cpu.items() if pid not in ranks)
    launch.load = statistics.mean(loads) if loads else None
    # create_time() carries the boot time, rounded to the second on Linux: compare it only with another one
    launch.ranks_start_s = created - top_created if ranks and top_created else None


def _measure(launch: Launch, events_file: Path, warmup: int, samples_per_step: int, t0: float) -> None:
    stamps = rank0_step_stamps(read_rank_events(events_file))
    if len(stamps) <= warmup:
        raise RuntimeError(f"{LABELS[launch.kind]}: only {len(stamps)} steps recorded in {events_file}")
    launch.step_times = measured_step_times(stamps, warmup)
    launch.samples_per_s = throughput(launch.step_times, samples_per_step)
    launch.samples_per_s_median = samples_per_step / statistics.median(launch.step_times)
    launch.step_time_ms = 1000 * statistics.mean(launch.step_times)
    launch.time_to_first_step_s = stamps[0][1] - t0
    start, end = stamps[warmup - 1][1], stamps[-1][1]
    launcher = cpu_between(launch.cpu_timeline, 1, start, end)
    ranks = cpu_between(launch.cpu_timeline, 2, start, end)
    launch.launcher_busy_pct = None if launcher is None else 100 * launcher / (end - start)
    launch.rank_cpu_ms_per_step = None if ranks is None else 1000 * ranks / len(launch.step_times)


def cpu_between(timeline: list[tuple[float, float, float]], column: int, start: float, end: float) -> float | None:
    """CPU seconds one column of the timeline grew by between two wall times (0.1 s readings around them)."""
    before = [row[column] for row in timeline if row[0] <= start]
    after = [row[column] for row in timeline if row[0] >= end]
    if not before or not after or end <= start:
        return None
    return after[0] - before[-1]


def _start(launch: Launch, cmd: list[str], env: dict[str, str], log: Path, args) -> float:
    """Run the command to its end; returns the wall time it was started at."""
    with open(log, "w", encoding="utf-8") as out:
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        _watch(proc, launch, args.world_size, args.timeout)
        launch.wall_s = time.time() - t0
    launch.returncode = proc.returncode
    if proc.returncode != 0:
        raise RuntimeError(f"{LABELS[launch.kind]} exited with {proc.returncode}; see {log}")
    return t0


def _tool(name: str, module: str) -> list[str]:
    """The console script next to this interpreter (as a user types it), else ``python -m``."""
    exe = Path(sys.executable).with_name(name + (".exe" if os.name == "nt" else ""))
    return [str(exe)] if exe.exists() else [sys.executable, "-m", module]


def launch_run(argv: list[str], env: dict[str, str], args, repeat: int, work: Path) -> Launch:
    launch = Launch("run", repeat)
    log = work / f"run-{repeat}.jsonl"
    t0 = _start(launch, _tool("ddpstudio", "ddpstudio") + argv, env, log, args)
    started = next(json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()
                   if line.startswith('{"type":"run_started"'))
    run_dir = Path(started["run_dir"])
    launch.plan_path = str(run_dir / "plan.json")

    _measure(launch, run_dir / "events" / "rank0.jsonl", args.warmup, args.batch_size * args.world_size, t0)
    return launch


def launch_launcher(argv: list[str], env: dict[str, str], args, repeat: int, work: Path) -> Launch:
    from ddpstudio.core.policy import write_plan
    from ddpstudio.core.launch.session import launcher_command

    plan = build_plan_for(argv)  # done before the clock starts: the window plans before Launch is pressed
    path = write_plan(plan)
    launch = Launch("launcher", repeat, plan_path=str(path))
    cmd = launcher_command(path)[:-1]  # without --stdin-control: nobody types "stop" here
    t0 = _start(launch, cmd, env, work / f"launcher-{repeat}.jsonl", args)
    _measure(launch, Path(plan.run_dir) / "events" / "rank0.jsonl", args.warmup,
             args.batch_size * args.world_size, t0)
    return launch


def launch_torchrun(plan, plan_path: Path, env: dict[str, str], args, repeat: int, work: Path) -> Launch:
    from ddpstudio.core.rendezvous.ports import find_free_port

    launch = Launch("torchrun", repeat, plan_path=str(plan_path))
    events = work / f"torchrun-{repeat}-events"
    cmd = _tool("torchrun", "torch.distributed.run") + [
        "--nproc-per-node", str(args.world_size), "--master-addr", "127.0.0.1", "--master-port",
        str(find_free_port()), "-m", "ddpstudio.rank.recipe", str(plan_path), "--init-method", "env://"]
    env = dict(env)
    # What DDP Studio's launcher gives every rank (core/launch/commands.py rank_env), set here by hand.
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8", "OMP_NUM_THREADS": "1",
                "DDPSTUDIO_EVENTS_DIR": str(events)})
    env.update(plan.env)
    t0 = _start(launch, cmd, env, work / f"torchrun-{repeat}.log", args)
    _measure(launch, events / "rank0.jsonl", args.warmup, args.batch_size * args.world_size, t0)
    return launch


# -- are they the same? ------------------------------------------------------------

def plan_differences(a_path: str, b_path: str) -> list[str]:
    """Differences in what the recipe reads from its plan (run ids and paths may differ)."""
    a, b = (json.loads(Path(p).read_text(encoding="utf-8")) for p in (a_path, b_path))
    keys = ("recipe", "backend", "device", "world_size", "rendezvous_timeout", "env")
    return [f"plan {k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def env_differences(a: Launch, b: Launch) -> tuple[list[str], set[str]]:
    """(real differences, launcher bookkeeping variables) between two launches' rank environments."""
    real, bookkeeping = [], set()
    for rank in sorted(set(a.rank_env) | set(b.rank_env)):
        ea, eb = a.rank_env.get(rank), b.rank_env.get(rank)
        if ea is None or eb is None:
            real.append(f"rank {rank}: environment not captured for {LABELS[(b if eb is None else a).kind]}")
            continue
        for key in sorted(set(ea) | set(eb)):
            if ea.get(key) == eb.get(key):
                continue
            if key.startswith(BOOKKEEPING):
                bookkeeping.add(key)
            else:
                real.append(f"rank {rank} {key}: {ea.get(key)!r} ({LABELS[a.kind]}) vs "
                            f"{eb.get(key)!r} ({LABELS[b.kind]})")
    return real, bookkeeping


def cmd_differences(a: Launch, b: Launch) -> list[str]:
    """Same interpreter, flags and module; only the plan path and torchrun's --init-method may differ."""
    return [f"rank {rank} command: {a.rank_cmd[rank]} vs {b.rank_cmd[rank]}"
            for rank in sorted(set(a.rank_cmd) & set(b.rank_cmd)) if a.rank_cmd[rank][:4] != b.rank_cmd[rank][:4]]


def same_training(launches: list[Launch], reference_plan: Path) -> dict:
    by = {k: [x for x in launches if x.kind == k] for k in KINDS}
    ref = by["torchrun"]
    plan, cmd, env, bookkeeping = set(), set(), set(), set()
    for kind in ("run", "launcher"):
        for x, y in zip(by[kind], ref):
            plan.update(plan_differences(x.plan_path, str(reference_plan)))
            cmd.update(cmd_differences(x, y))
            real, book = env_differences(x, y)
            env.update(real)
            bookkeeping |= book
    first = next((x.rank_env.get("0") for x in launches if x.rank_env.get("0")), {})
    return {"plan": sorted(plan), "cmd": sorted(cmd), "env": sorted(env), "bookkeeping": sorted(bookkeeping),
            "shared": {k: first[k] for k in SHOWN if k in first}}


# -- report ------------------------------------------------------------------------

def machine() -> str:
    import platform

    import torch

    if torch.cuda.is_available():
        return f"{platform.system()}, {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    return (f"{platform.system()} {platform.release()}, {os.cpu_count()} cores "
            f"({platform.processor() or platform.machine()}), Python {platform.python_version()}, "
            f"torch {torch.__version__}, CPU ranks over Gloo")


def summarise(launches: list[Launch]) -> dict:
    by = {k: [x for x in launches if x.kind == k] for k in KINDS}
    out: dict = {}
    for kind in KINDS:
        if by[kind]:
            out[f"{kind}_samples_per_s"] = statistics.median(x.samples_per_s for x in by[kind])
            out[f"{kind}_time_to_first_step_s"] = statistics.median(x.time_to_first_step_s for x in by[kind])
            busy = [x.launcher_busy_pct for x in by[kind] if x.launcher_busy_pct is not None]
            out[f"{kind}_launcher_busy_pct"] = statistics.median(busy) if busy else None
            work = [x.rank_cpu_ms_per_step for x in by[kind] if x.rank_cpu_ms_per_step is not None]
            out[f"{kind}_rank_cpu_ms_per_step"] = statistics.median(work) if work else None
            spawned = [x.ranks_start_s for x in by[kind] if x.ranks_start_s is not None]
            out[f"{kind}_ranks_start_s"] = statistics.median(spawned) if spawned else None
    for kind in ("run", "launcher"):
        pairs = list(zip(by[kind], by["torchrun"]))
        if not pairs:
            continue
        out[kind] = {
            "ratio": statistics.median(x.samples_per_s / y.samples_per_s for x, y in pairs),
            "ratio_median_steps": statistics.median(x.samples_per_s_median / y.samples_per_s_median
                                                    for x, y in pairs),
            "pair_ratios": [x.samples_per_s / y.samples_per_s for x, y in pairs],
            "time_to_first_step_diff_s": statistics.median(x.time_to_first_step_s - y.time_to_first_step_s
                                                           for x, y in pairs),
            "pair_time_to_first_step_diffs_s": [x.time_to_first_step_s - y.time_to_first_step_s for x, y in pairs],
        }
    return out


def print_report(launches: list[Launch], summary: dict, checks: dict, args, argv: list[str]) -> None:
    print(f"\nmachine: {machine()}")
    print(f"training: ddpstudio {' '.join(argv)}\n  ({args.steps} measured steps after {args.warmup} warm-up "
          f"steps, {args.world_size} ranks x batch {args.batch_size}; launches alternate)\n")
    print(f"{'#':>2}  {'launched by':<20} {'samples/s':>9} {'(median)':>8} {'step ms':>8} {'first step s':>12} "
          f"{'ranks start s':>13} {'wall s':>7} {'launcher CPU s':>14} {'(measuring)':>11} {'ranks CPU ms/step':>17} "
          f"{'load':>5}")
    for x in launches:
        print(f"{x.repeat:>2}  {LABELS[x.kind]:<20} {x.samples_per_s:9.1f} {x.samples_per_s_median:8.1f} "
              f"{x.step_time_ms:8.1f} {x.time_to_first_step_s:12.2f} "
              f"{'' if x.ranks_start_s is None else f'{x.ranks_start_s:.2f}':>13} "
              f"{x.wall_s:7.1f} {x.launcher_cpu_s:14.1f} "
              f"{'' if x.launcher_busy_pct is None else f'{x.launcher_busy_pct:.1f}%':>11} "
              f"{'' if x.rank_cpu_ms_per_step is None else f'{x.rank_cpu_ms_per_step:.0f}':>17} {x.load:5.1f}")
    s = summary
    print("\nmedians:")
    for k in KINDS:
        if k + "_samples_per_s" in s:
            busy = s[k + "_launcher_busy_pct"]
            spawned = s[k + "_ranks_start_s"]
            print(f"  {LABELS[k]:<20} {s[k + '_samples_per_s']:7.1f} samples/s, first step after "
                  f"{s[k + '_time_to_first_step_s']:.2f} s (ranks started after "
                  f"{'n/a' if spawned is None else f'{spawned:.2f}'} s), launcher side busy "
                  f"{'n/a' if busy is None else f'{busy:.1f}%'} of one core while measuring, ranks' CPU "
                  f"{s[k + '_rank_cpu_ms_per_step'] or float('nan'):.0f} ms per step")
    for kind in ("run", "launcher"):
        if kind not in s:
            continue
        r = s[kind]
        print(f"{LABELS[kind]} vs torchrun: samples/s ratio {r['ratio']:.3f} (median of pairs "
              f"{', '.join(f'{v:.3f}' for v in r['pair_ratios'])}; from median step times "
              f"{r['ratio_median_steps']:.3f}), target >= 0.99 {'met' if r['ratio'] >= 0.99 else 'NOT met'}; "
              f"time to first step {r['time_to_first_step_diff_s']:+.2f} s (pairs "
              f"{', '.join(f'{v:+.2f}' for v in r['pair_time_to_first_step_diffs_s'])}), target < 1 s "
              f"{'met' if r['time_to_first_step_diff_s'] < 1.0 else 'NOT met'}")
    print("\nsame training?")
    print(f"  plans: {'; '.join(checks['plan']) or 'identical recipe, backend, device, world size, env'}")
    print(f"  rank command lines: {'; '.join(checks['cmd']) or 'same interpreter, -u, -m ddpstudio.rank.recipe'}")
    print(f"  rank environments: {'identical' if not checks['env'] else 'DIFFER'} apart from launcher "
          f"bookkeeping ({', '.join(checks['bookkeeping']) or 'none'}); all have "
          + ", ".join(f"{k}={v}" for k, v in checks["shared"].items()))
    for line in checks["env"]:
        print(f"    {line}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3, help="launches of each kind, alternating (default 3)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"which launches, in order (default {','.join(KINDS)})")
    p.add_argument("--steps", type=int, default=30, help="measured steps per launch (default 30)")
    p.add_argument("--warmup", type=int, default=5, help="steps not counted (default 5)")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32, help="per rank (default 32)")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per launch before it is killed")
    p.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    p.add_argument("--keep", action="store_true", help="keep the working folder (logs, events, plans)")
    args = p.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    if "torchrun" not in kinds or any(k not in KINDS for k in kinds):
        p.error(f"--kinds takes a comma-separated subset of {','.join(KINDS)} that includes torchrun")

    work = Path(tempfile.mkdtemp(prefix="ddpstudio-overhead-"))
    os.environ["DDPSTUDIO_HOME"] = str(work / "home")  # every run, store and plan lands in this folder
    env = dict(os.environ)
    argv_run = run_argv(args)
    plan = build_plan_for(argv_run)
    plan_path = work / "torchrun-plan.json"
    plan.write(plan_path)
    launches: list[Launch] = []
    try:
        for repeat in range(1, args.repeats + 1):
            for kind in kinds:
                print(f"[{repeat}/{args.repeats}] {LABELS[kind]} ...", file=sys.stderr, flush=True)
                if kind == "run":
                    launches.append(launch_run(argv_run, env, args, repeat, work))
                elif kind == "launcher":
                    launches.append(launch_launcher(argv_run, env, args, repeat, work))
                else:
                    launches.append(launch_torchrun(plan, plan_path, env, args, repeat, work))
        checks = same_training(launches, plan_path)
        summary = summarise(launches)
        print_report(launches, summary, checks, args, argv_run)
        if args.json:
            Path(args.json).write_text(json.dumps({
                "machine": machine(), "argv": argv_run, "summary": summary, "checks": checks,
                "launches": [{k: v for k, v in asdict(x).items()
                              if k not in ("rank_env", "rank_cmd", "cpu_timeline")}
                             for x in launches]}, indent=2), encoding="utf-8")
    finally:
        if args.keep:
            print(f"working folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
