"""Plain user scripts under torchrun and under ``ddpstudio run``, with and without the rank helper (issue 20).

    .venv/bin/python benchmarks/plain_scripts.py [--rounds 5] [--scripts mlp,resnet18] [--source DIR] [--json out.json]

Two torchrun-style scripts shipped in ``benchmarks/plain/`` (``resnet18.py``:
slow steps; ``mlp.py``: hundreds of steps/s, every rank printing its loss each
step) are launched three ways, 2 Gloo ranks on the CPU:

* ``torchrun``: ``torchrun --nproc-per-node 2 --master-addr 127.0.0.1
  --master-port P SCRIPT ...`` as a user types it, its output to a file;
* ``helper``: ``ddpstudio run --world-size 2 --script SCRIPT --script-style env
  -- ...`` (the rank helper on, the default), its output to a file;
* ``no helper``: the same with ``--no-rank-helper``.

``--source DIR`` (repeatable) runs the two studio kinds from other checkouts
too (their ``ddpstudio`` first on PYTHONPATH), in the same rounds: before and
after a change, under the same load. The order rotates every round, so no
launch always goes first on a shared machine. Every kind is measured the same way: the script itself writes rank
0's steps/s over its steps after the warm-up, printing included, to a file
(``--rate-file``); nothing comes from DDP Studio's own events. The report is
one markdown table per run: per script and kind, the median steps/s, its
spread (min-max) and the ratio to torchrun (median of the per-round ratios,
with their spread), and the 1-minute load average during the launches.

A launch whose rank 0 wrote its rate and then exited non-zero is counted, not
fatal: torch 2.14's Gloo can abort a process at exit, after its last
collective (pytorch PR #179291), under torchrun as under ``ddpstudio run``.
The rate was measured before that exit, and the table says how many launches
of each kind ended so. A launch with no rate file is fatal, as before.
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
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from overhead import _tool  # noqa: E402

KINDS = ("torchrun", "helper", "no helper")
PLAIN = REPO / "benchmarks" / "plain"
# Script -> its own arguments (steps, warm-up): each launch trains long enough for a steady rate.
SCRIPT_ARGS = {"mlp": ["--steps", "1500", "--warmup", "150"], "resnet18": ["--steps", "15", "--warmup", "3"]}


@dataclass(frozen=True)
class Launch:
    """One way to launch: a kind, and for studio's kinds the checkout whose ``ddpstudio`` runs."""

    kind: str
    source: Path | None = None

    def label(self, named: bool) -> str:
        text = {"torchrun": "torchrun", "helper": "`ddpstudio run` (rank helper)",
                "no helper": "`ddpstudio run --no-rank-helper`"}[self.kind]
        return f"{text}, {self.source.name or self.source}" if named and self.source is not None else text


@dataclass
class Result:
    """One script's steps/s per launch, in round order, and the load seen while each ran."""

    script: str
    rates: dict[Launch, list[float]] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)
    crashed_at_exit: dict[Launch, int] = field(default_factory=dict)  # rate written, then a non-zero exit


def command(kind: str, script: Path, script_args: list[str], world_size: int, port: int) -> list[str]:
    """The command line a user types for ``kind``."""
    if kind == "torchrun":
        return _tool("torchrun", "torch.distributed.run") + [
            "--nproc-per-node", str(world_size), "--master-addr", "127.0.0.1", "--master-port", str(port),
            str(script), *script_args]
    return _tool("ddpstudio", "ddpstudio") + [
        "run", "--world-size", str(world_size), "--script", str(script), "--script-style", "env",
        *(["--no-rank-helper"] if kind == "no helper" else []), "--", *script_args]


def launch(how: Launch, script: Path, script_args: list[str], args: argparse.Namespace, work: Path,
           n: int) -> tuple[float, float, int]:
    """One launch to its end: (rank 0's steps/s as the script measured it, mean 1-minute load meanwhile,
    the exit code: non-zero only where the rate was written first)."""
    from ddpstudio.core.rendezvous.ports import find_free_port

    kind = how.kind
    rate_file = work / f"{script.stem}-{kind.replace(' ', '-')}-{abs(hash(how.source))}-{n}.json"
    log = rate_file.with_suffix(".log")
    cmd = command(kind, script, [*script_args, "--rate-file", str(rate_file)], args.world_size, find_free_port())
    env = dict(os.environ)
    if how.source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(how.source), env.get("PYTHONPATH")]))
    loads = []
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
        deadline = time.monotonic() + args.timeout
        while proc.poll() is None:
            loads.append(os.getloadavg()[0])
            if time.monotonic() > deadline:
                os.killpg(proc.pid, 9)
                proc.wait()
                raise RuntimeError(f"{kind} on {script.name} did not finish within {args.timeout:.0f} s; see {log}")
            time.sleep(0.5)
    if not rate_file.exists():
        raise RuntimeError(f"{kind} on {script.name} failed (exit {proc.returncode}); see {log}")
    rate = json.loads(rate_file.read_text(encoding="utf-8"))["steps_per_s"]
    return rate, statistics.mean(loads or [0.0]), proc.returncode


def launches(sources: list[Path]) -> list[Launch]:
    """torchrun, then each checkout's two studio kinds."""
    return [Launch("torchrun"), *(Launch(kind, source) for source in sources for kind in KINDS[1:])]


def measure(names: list[str], hows: list[Launch], args: argparse.Namespace, work: Path) -> list[Result]:
    results = [Result(name, {how: [] for how in hows}, crashed_at_exit={how: 0 for how in hows}) for name in names]
    for r in range(args.rounds):
        order = hows[r % len(hows):] + hows[:r % len(hows)]  # rotate: no launch always goes first
        for result in results:
            for how in order:
                script = PLAIN / f"{result.script}.py"
                rate, load, code = launch(how, script, SCRIPT_ARGS[result.script], args, work, r)
                result.rates[how].append(rate)
                result.loads.append(load)
                result.crashed_at_exit[how] += code != 0
                ended = f", then exit {code}" if code != 0 else ""
                print(f"[{r + 1}/{args.rounds}] {result.script} {how.label(True)}: {rate:.2f} steps/s "
                      f"(load {load:.1f}{ended})", file=sys.stderr, flush=True)
    return results


def table(results: list[Result], named: bool) -> str:
    """One markdown table: per script and launch, median steps/s (min-max) and the ratio to torchrun."""
    rows = ["| script | launched by | steps/s, median (min-max) | ratio to torchrun, median (min-max) | load "
            "| non-zero exits after the rate |", "|---|---|---|---|---|---|"]
    for res in results:
        base = res.rates[Launch("torchrun")]
        load = f"{min(res.loads):.1f}-{max(res.loads):.1f}"
        for how, got in res.rates.items():
            ratios = [a / b for a, b in zip(got, base)]
            ratio = ("1" if how.kind == "torchrun" else
                     f"**{statistics.median(ratios):.3f}** ({min(ratios):.3f}-{max(ratios):.3f})")
            rows.append(f"| {res.script} | {how.label(named)} | {statistics.median(got):.2f} "
                        f"({min(got):.2f}-{max(got):.2f}) | {ratio} | {load} | {res.crashed_at_exit[how]} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5, help="rounds; each launches every kind once (default 5)")
    p.add_argument("--scripts", default="mlp,resnet18", help="which of benchmarks/plain/ (default mlp,resnet18)")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per launch before it is killed")
    p.add_argument("--source", action="append", type=Path, metavar="DIR",
                   help="a checkout whose ddpstudio runs the studio kinds (repeatable; default this one)")
    p.add_argument("--json", metavar="PATH", help="also write every rate as JSON")
    args = p.parse_args(argv)
    sources = [s.resolve() for s in args.source] if args.source else [REPO]
    names = [s for s in args.scripts.split(",") if s]
    if any(s not in SCRIPT_ARGS for s in names):
        p.error(f"--scripts takes a comma-separated subset of {','.join(SCRIPT_ARGS)}")
    work = Path(tempfile.mkdtemp(prefix="ddpstudio-plain-"))
    os.environ["DDPSTUDIO_HOME"] = str(work / "home")  # every run lands in this folder
    try:
        results = measure(names, launches(sources), args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.world_size} Gloo ranks on the CPU, {args.rounds} rotating rounds; "
          + "; ".join(f"{n}: {' '.join(SCRIPT_ARGS[n])}" for n in names) + "\n")
    print(table(results, named=len(sources) > 1))
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"script": r.script, "loads": r.loads,
              "rates": {how.label(True): rates for how, rates in r.rates.items()}} for r in results], indent=2),
            encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
