"""Reliability soak: random kill -9 trials on one fixed store path, each followed by the same command.

    .venv/bin/python benchmarks/soak.py [--trials 50] [--pairs 50] [--seed 1] [--steps 40] [--json out.json]

Each trial starts ``ddpstudio run`` (the built-in recipe, 2 Gloo ranks on the
CPU) on one fixed ``--store-path``, SIGKILLs a victim at a random moment in
the first ``--window`` seconds (the CLI, counted from its start; the
launcher, one rank, or the whole group of CLI + launcher + ranks, counted
from the launcher's start, so the ranks' own first seconds are hit too),
records where the run was (CLI starting, ranks starting, training), waits for the CLI to return as a user would,
and runs the same command again on the same path. Counted: relaunches that
finish (exit 0) with no manual step in between; processes of either run still
alive afterwards; time from the kill until the relaunch's first training
step ("start-up" is the part of it from the relaunch to that step: what any
fresh run costs). Then ``--pairs`` pairs of the same command started 0-3 s apart on one
fixed path: a cross-join is a pair whose two runs both got past the claim and
overlapped in time (their ranks would have formed one process group).
Everything runs in a private DDP Studio home, so it touches no other run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

VICTIMS = ("cli", "launcher", "rank", "group")
REPO = Path(__file__).resolve().parents[1]


def command(store: str, steps: int) -> list[str]:
    return [sys.executable, "-m", "ddpstudio", "run", "--json", "--max-steps", str(steps), "--batch-size", "8",
            "--image-size", "32", "--rendezvous-timeout", "30", "--store-path", store]


def records(known: set[str] | None = None) -> list:
    from ddpstudio.core.cleanup import registry

    return [r for r in registry.load_records()[0] if known is None or r.run_id not in known]


def ours(home: str) -> list[psutil.Process]:
    """Live processes started under the soak's home (by environment), this script excepted."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get("DDPSTUDIO_HOME") == home \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def first_step_after(cli_log: Path, deadline: float) -> float | None:
    while time.monotonic() < deadline:
        if '"type":"global_step"' in cli_log.read_text(errors="replace"):
            return time.monotonic()
        time.sleep(0.1)
    return None


def kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _phase(rec) -> str:
    """Where the victim run was when the kill landed."""
    if rec is None:
        return "CLI starting"
    try:
        text = (Path(rec.run_dir) / "events.jsonl").read_text(errors="replace")
    except OSError:
        text = ""
    if '"type":"global_step"' in text:
        return "training"
    return "ranks starting" if rec.ranks else "launcher starting"


def trial(i: int, victim: str, at_s: float, store: str, steps: int, logs: Path) -> dict:
    known = {r.run_id for r in records()}
    log = logs / f"trial{i}-victim.log"
    with open(log, "w") as out:
        cli = subprocess.Popen(command(store, steps), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    t_start = time.monotonic()
    rec = None
    if victim != "cli":  # the moment counts from the launcher's start: a slow CLI start-up would eat it
        while rec is None and time.monotonic() - t_start < 120 and cli.poll() is None:
            new = records(known)
            rec = new[0] if new else None
            time.sleep(0.02)
    t_zero = time.monotonic()
    time.sleep(at_s)
    pids: list[int] = []
    while not pids and time.monotonic() - t_start < 120 and cli.poll() is None:
        new = records(known)
        rec = new[0] if new else None
        if victim == "cli":
            pids = [cli.pid]
        elif victim == "launcher" and rec:
            pids = [rec.launcher_pid]
        elif victim == "rank" and rec and rec.ranks:
            pids = [random.choice(rec.ranks).pid]
        elif victim == "group":
            pids = [cli.pid] + ([rec.launcher_pid] + [r.pid for r in rec.ranks] if rec else [])
        if not pids:
            time.sleep(0.05)
    killed_at = time.monotonic()
    phase = _phase(rec)
    kill(pids)
    try:
        cli.wait(60)  # the prompt comes back
    except subprocess.TimeoutExpired:
        cli.kill()
        cli.wait()
    time.sleep(0.5)  # a person reading the message, then pressing up-arrow and Enter
    relog = logs / f"trial{i}-relaunch.log"
    with open(relog, "w") as out:
        again = subprocess.Popen(command(store, steps), stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
    relaunched_at = time.monotonic()
    stepped = first_step_after(relog, time.monotonic() + 180)
    try:
        code = again.wait(300)
    except subprocess.TimeoutExpired:
        again.kill()
        code = again.wait()
    return {"trial": i, "victim": victim, "at_s": round(at_s, 2), "killed_after_s": round(killed_at - t_zero, 2),
            "phase": phase,
            "pids": pids, "victim_exit": cli.returncode, "relaunch_exit": code,
            "recover_s": round(stepped - killed_at, 2) if stepped else None,
            "cold_start_s": round(stepped - relaunched_at, 2) if stepped else None,
            "relaunch_said": [ln for ln in relog.read_text(errors="replace").splitlines()
                              if ln.startswith("ddpstudio:")][:3],
            # why a relaunch failed, kept with the figures (the log folder is temporary)
            "relaunch_tail": relog.read_text(errors="replace").splitlines()[-8:] if code else []}


def pair(i: int, gap_s: float, store: str, steps: int, logs: Path) -> dict:
    known = {r.run_id for r in records()}
    procs = []
    for k in range(2):
        with open(logs / f"pair{i}-{k}.log", "w") as out:
            procs.append(subprocess.Popen(command(store, steps), stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL))
        if k == 0:
            time.sleep(gap_s)
    codes = [p.wait(400) for p in procs]
    runs = records(known)
    spans = [(r.started, r.ended or time.time()) for r in runs if r.ranks]
    overlap = len(spans) == 2 and max(s for s, _ in spans) < min(e for _, e in spans)
    return {"pair": i, "gap_s": round(gap_s, 2), "exits": codes, "runs_started": len(spans), "cross_join": overlap}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--pairs", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=40, help="training steps per run")
    ap.add_argument("--window", type=float, default=20.0, help="kills land in the first this many seconds")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    random.seed(args.seed)
    home = tempfile.mkdtemp(prefix="ddpstudio-soak-")
    os.environ["DDPSTUDIO_HOME"] = home
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    logs = Path(home) / "soak-logs"
    logs.mkdir()
    store = str(Path(home) / "fixed" / "pg")
    trials = []
    for i in range(args.trials):
        victim = VICTIMS[i % len(VICTIMS)] if i < len(VICTIMS) else random.choice(VICTIMS)
        result = trial(i, victim, random.uniform(0, args.window), store, args.steps, logs)
        result["left"] = [p.pid for p in ours(home)]
        trials.append(result)
        print(json.dumps(result), flush=True)
    pairs = []
    for i in range(args.pairs):
        result = pair(i, random.uniform(0, 3), str(Path(home) / f"pair{i}" / "pg"), args.steps, logs)
        result["left"] = [p.pid for p in ours(home)]
        pairs.append(result)
        print(json.dumps(result), flush=True)
    report(trials, pairs, home)
    if args.json:
        Path(args.json).write_text(json.dumps({"trials": trials, "pairs": pairs, "home": home}, indent=2))
    return 0 if all(t["relaunch_exit"] == 0 and not t["left"] for t in trials) and \
        not any(p["cross_join"] or p["left"] for p in pairs) else 1


def _median(values: list) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def report(trials: list[dict], pairs: list[dict], home: str) -> None:
    print(f"\nkill -9 trials (home {home})")
    print(f"{'victim':<10}{'trials':>7}{'relaunch ok':>13}{'left':>6}{'recover median s':>18}{'max s':>8}"
          f"{'of which start-up, median s':>29}")
    missed = [t for t in trials if not t["pids"]]
    trials = [t for t in trials if t["pids"]]
    for victim in (*VICTIMS, "all"):
        rows = [t for t in trials if victim in ("all", t["victim"])]
        if not rows:
            continue
        rec = [t["recover_s"] for t in rows if t["recover_s"] is not None]
        print(f"{victim:<10}{len(rows):>7}{sum(t['relaunch_exit'] == 0 for t in rows):>13}"
              f"{sum(len(t['left']) for t in rows):>6}"
              f"{(statistics.median(rec) if rec else float('nan')):>18.1f}{(max(rec) if rec else float('nan')):>8.1f}"
              f"{_median([t['cold_start_s'] for t in rows]):>29.1f}")
    phases = {}
    for t in trials:
        phases[t["phase"]] = phases.get(t["phase"], 0) + 1
    print("killed while: " + ", ".join(f"{k} {v}" for k, v in sorted(phases.items()))
          + (f"; not counted: {len(missed)} (the run had ended before its moment; raise --steps)" if missed else ""))
    if pairs:
        one = sum(sorted(p["exits"]) == [0, 2] for p in pairs)
        print(f"\nconcurrent pairs: {len(pairs)}; exactly one ran, the other refused (exit 2): {one}; "
              f"cross-joins: {sum(p['cross_join'] for p in pairs)}; "
              f"left: {sum(len(p['left']) for p in pairs)}")


if __name__ == "__main__":
    sys.exit(main())
