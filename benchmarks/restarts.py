"""What a restart costs (``--max-restarts``, issue 25 §4): seconds from the kill to training again, steps lost.

    .venv/bin/python benchmarks/restarts.py [--steps 300] [--kill-at 150] [--checkpoint-every 20] [--rounds 3]
        [--json restarts.json]

Each round runs two ``ddpstudio run --json`` of the built-in ``mlp`` (8 px, batch 16, two Gloo ranks on the
CPU, ``--max-restarts 1``, a checkpoint every ``--checkpoint-every`` steps), in turn (the order alternates
between rounds, so drift on a shared machine hits both):

* ``steady``: nobody kills anything;
* ``killed``: when rank 0 reports step ``--kill-at``, rank 1 gets SIGKILL (kill -9); the launcher stops
  rank 0, cleans the store and starts both again from the last checkpoint.

Measured on the wall clock of this machine (the ranks stamp their events with it): kill to the launcher's
``run_restarted`` event, kill to rank 0's first step after it, beside a fresh start (the run not killed:
command start to rank 0's first step), the steps trained again (the last step rank 0 reported before the
restart minus the checkpoint's step), and each run's total time, command start to exit.
The load average is read before and after, since a busy machine stretches every figure.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ddpstudio.core import protocol  # noqa: E402
from rounds import machine_load, rotate, save  # noqa: E402

KINDS = ("steady", "killed")


def run(kind: str, args: argparse.Namespace, home: Path) -> dict:
    """One run, its events read as they come; ``killed`` sends SIGKILL to rank 1 at ``--kill-at``."""
    argv = [sys.executable, "-m", "ddpstudio", "run", "--json", "--model", "mlp", "--image-size", "8",
            "--batch-size", "16", "--workers", "0", "--world-size", "2", "--epochs", "100", "--max-steps",
            str(args.steps), "--max-restarts", "1", "--checkpoint-dir", str(home / f"ckpt-{time.time_ns()}"),
            "--checkpoint-every", str(args.checkpoint_every)]
    env = {**os.environ, "DDPSTUDIO_HOME": str(home)}
    errors = home / f"{kind}-{time.time_ns()}.err"  # a file, not a pipe nobody reads until the end
    started, wall = time.monotonic(), time.time()
    with errors.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                                stdin=subprocess.DEVNULL)
    parser, evs, killed_at = protocol.EventParser(), [], None
    try:
        for line in proc.stdout:
            for ev in parser.feed(line):
                evs.append(ev)
                due = ev.type == protocol.STEP and ev.rank == 0 and int(ev.get("step", 0)) >= args.kill_at
                if kind == "killed" and killed_at is None and due:
                    [pid, *_] = [e.get("pid") for e in reversed(evs) if e.type == protocol.RANK_STARTED and e.rank == 1]
                    killed_at = time.time()
                    os.kill(pid, signal.SIGKILL)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    total = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{kind}: exit {proc.returncode}\n{errors.read_text(encoding='utf-8')[-2000:]}")
    first = next(e for e in evs if e.type == protocol.STEP and e.rank == 0)
    out = {"total_s": total, "start_to_step_s": first.t - wall}
    if killed_at is not None:
        [restarted] = [e for e in evs if e.type == protocol.RUN_RESTARTED]
        at = evs.index(restarted)
        before = [int(e.get("step")) for e in evs[:at] if e.type == protocol.STEP and e.rank == 0]
        first = next(e for e in evs[at:] if e.type == protocol.STEP and e.rank == 0)
        out.update(kill_to_restart_s=restarted.t - killed_at, kill_to_step_s=first.t - killed_at,
                   from_step=int(restarted.get("from_step")), lost_steps=max(before) - int(restarted.get("from_step")))
    return out


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f} to {max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--kill-at", type=int, default=150, help="rank 0's step at which rank 1 is killed")
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ddpstudio-restarts-") as home:
        rounds, load = rotate(KINDS, args.rounds, lambda kind: run(kind, args, Path(home)))
    print(f"mlp 8 px, batch 16 per rank, 2 Gloo ranks on the CPU, {args.steps} steps, a checkpoint every "
          f"{args.checkpoint_every}, rank 1 killed (SIGKILL) at step {args.kill_at}, --max-restarts 1; "
          f"{machine_load(load)}\n")
    print("| round | kill to restart (s) | kill to training again (s) | fresh start to training (s) "
          "| steps trained again | run killed (s) | run not killed (s) | extra (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rounds, 1):
        k, s = r["killed"], r["steady"]
        print(f"| {i} | {k['kill_to_restart_s']:.1f} | {k['kill_to_step_s']:.1f} | {s['start_to_step_s']:.1f} "
              f"| {k['lost_steps']} "
              f"(from step {k['from_step']}) | {k['total_s']:.1f} | {s['total_s']:.1f} "
              f"| {k['total_s'] - s['total_s']:.1f} |")
    killed = [r["killed"] for r in rounds]
    print(f"| median (min to max) | {_spread([k['kill_to_restart_s'] for k in killed])} "
          f"| {_spread([k['kill_to_step_s'] for k in killed])} "
          f"| {_spread([r['steady']['start_to_step_s'] for r in rounds])} "
          f"| {statistics.median(k['lost_steps'] for k in killed):g} | {_spread([k['total_s'] for k in killed])} "
          f"| {_spread([r['steady']['total_s'] for r in rounds])} "
          f"| {_spread([r['killed']['total_s'] - r['steady']['total_s'] for r in rounds])} |")
    save(args.json, args, load, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
