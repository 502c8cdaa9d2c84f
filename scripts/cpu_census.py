"""Where the test suite's CPU goes: each test's own CPU and that of every Python process it starts.

    python scripts/cpu_census.py -- -n auto --maxprocesses 4 tests/test_run_e2e.py
    python scripts/cpu_census.py --report /tmp/census    (a census already taken)

``--durations`` gives wall seconds, which on a loaded 2-core machine say more about the load than
about the test. This counts CPU seconds instead, and charges each to the test that caused it:

- in the pytest process (or xdist worker) itself: the CPU used between a test's setup and teardown
  (a plugin, ``-p _census_plugin``);
- in every Python process started under it (CLI, launcher, ranks, scripts), however deep: a
  ``sitecustomize`` put first on PYTHONPATH records the process's CPU at exit, with the test named
  by ``PYTEST_CURRENT_TEST`` (pytest sets it and children inherit it). The rank helper chains to a
  shadowed ``sitecustomize`` (rank/helper/sitecustomize.py ``_chain``), so script ranks count too.

Not counted: processes killed by a signal (no exit hook runs: the rank a test kills on purpose),
and non-Python processes (Wine, makensis, slurmd). The "reaped" column fills that gap from the other
side: the CPU of every descendant the test's pytest process waited for (``RUSAGE_CHILDREN``: a
process counts there once its parent has reaped it, and a parent's figure includes its own reaped
children), killed or not, Python or not; orphans that init reaps are missing from it. The table
says how many torch imports each test paid for, since every rank's start costs an ``import torch``
(docs/testing.md).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ENV = "DDPSTUDIO_CENSUS"

# Written into a temporary folder that goes first on PYTHONPATH.
SITECUSTOMIZE = r'''
import os
_dir = os.environ.get("DDPSTUDIO_CENSUS")


def _chain():
    """Run the sitecustomize this one shadows, as site would have."""
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    here = os.path.dirname(os.path.abspath(__file__))
    path = __import__("sys").path
    where = [os.path.abspath(p or os.curdir) for p in path]
    rest = path[where.index(here) + 1:] if here in where else path  # the ones it shadows: after it
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(module_from_spec(spec))


if _dir:
    import atexit
    import json
    import sys
    import time

    _start = time.time()

    def _record():
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        entry = {"pid": os.getpid(), "argv": sys.argv[:3], "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
                 "torch": "torch" in sys.modules, "torchvision": "torchvision" in sys.modules,
                 "cpu": usage.ru_utime + usage.ru_stime, "wall": time.time() - _start, "kind": "process"}
        try:
            with open(os.path.join(_dir, "p%d.json" % os.getpid()), "w") as fh:
                json.dump(entry, fh)
        except OSError:
            pass

    atexit.register(_record)
_chain()
'''

PLUGIN = r'''
import json
import os
import resource

import pytest

_dir = os.environ.get("DDPSTUDIO_CENSUS")


def _cpu(who=resource.RUSAGE_SELF):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, reaped = _cpu(), _cpu(resource.RUSAGE_CHILDREN)
    yield
    if _dir:
        with open(os.path.join(_dir, "t%d.jsonl" % os.getpid()), "a") as fh:
            fh.write(json.dumps({"test": item.nodeid, "cpu": _cpu() - before, "kind": "in-process",
                                "reaped": _cpu(resource.RUSAGE_CHILDREN) - reaped, "pid": os.getpid()}) + "\n")
'''


def take(out: Path, pytest_args: list[str]) -> int:
    """Run pytest with the hooks; one JSON file per process (and per worker for in-process CPU) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cpu-census-") as hooks:
        Path(hooks, "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        Path(hooks, "_census_plugin.py").write_text(PLUGIN, encoding="utf-8")
        kept = os.environ.get("PYTHONPATH", "")
        env = {**os.environ, ENV: str(out), "PYTHONPATH": hooks + (os.pathsep + kept if kept else "")}
        return subprocess.call([sys.executable, "-m", "pytest", "-p", "_census_plugin", *pytest_args], env=env)


def read(census: Path) -> list[dict]:
    entries = []
    for path in census.iterdir():
        try:
            if path.suffix == ".json":
                entries.append(json.loads(path.read_text(encoding="utf-8")))
            elif path.suffix == ".jsonl":
                entries += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        except (OSError, ValueError):
            continue  # a process that died while writing
    return entries


def _test_of(entry: dict) -> str:
    """``tests/test_x.py::test_y[param]``: PYTEST_CURRENT_TEST ends with `` (call)``/`` (setup)``."""
    return entry.get("test", "").rsplit(" (", 1)[0] or "(outside any test)"


def _without_tests(entries: list[dict]) -> list[dict]:
    """A pytest process's own record less what its tests used (those are charged to the tests)."""
    spent = collections.Counter()
    for e in entries:
        if e.get("kind") == "in-process":
            spent[e.get("pid")] += e["cpu"]
    for e in entries:
        if e.get("kind") == "process" and e.get("pid") in spent:
            e["cpu"] = max(0.0, e["cpu"] - spent[e["pid"]])
    return entries


def report(census: Path, top: int) -> str:
    entries = _without_tests(read(census))
    tests: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in entries:
        row = tests[_test_of(e)]
        row["cpu"] += e["cpu"]
        if e.get("kind") == "in-process":
            row["own"] += e["cpu"]
            row["reaped"] += e.get("reaped", 0.0)
        else:
            row["processes"] += 1
            row["torch"] += bool(e.get("torch"))
            row["torchvision"] += bool(e.get("torchvision"))
            row[Path(str((e.get("argv") or ["?"])[0])).name] += 1
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for name, row in tests.items():
        files[name.split("::")[0]].update({k: row[k] for k in ("cpu", "own", "reaped", "processes", "torch",
                                                                 "torchvision")})
    total = sum(row["cpu"] for row in tests.values())
    reaped = sum(row["reaped"] for row in tests.values())
    own = sum(row["own"] for row in tests.values())
    lines = [f"{len(entries)} records, {total:.0f} s of CPU in all (killed processes and non-Python ones not "
             f"counted); in pytest plus every reaped descendant: {own + reaped:.0f} s", "",
             "| file | CPU s | in pytest s | reaped s | processes | torch imports | torchvision |",
             "|---|---|---|---|---|---|---|"]
    for name, row in sorted(files.items(), key=lambda kv: -(kv[1]["own"] + kv[1]["reaped"]))[:top]:
        lines.append(f"| {name} | {row['cpu']:.1f} | {row['own']:.1f} | {row['reaped']:.1f} | {row['processes']} "
                     f"| {row['torch']} | {row['torchvision']} |")
    lines += ["", "| test | CPU s | in pytest s | reaped s | torch imports | what it starts |",
              "|---|---|---|---|---|---|"]
    skip = {"cpu", "own", "reaped", "processes", "torch", "torchvision"}
    for name, row in sorted(tests.items(), key=lambda kv: -(kv[1]["own"] + kv[1]["reaped"]))[:top]:
        started = ", ".join(f"{k} x{n}" for k, n in row.most_common() if k not in skip)
        lines.append(f"| {name} | {row['cpu']:.1f} | {row['own']:.1f} | {row['reaped']:.1f} | {row['torch']} "
                     f"| {started} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pytest_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="where the census goes (default: a new temporary folder)")
    parser.add_argument("--report", type=Path, metavar="DIR", help="only print the tables of a census taken before")
    parser.add_argument("--top", type=int, default=40, help="rows per table (default 40)")
    args = parser.parse_args(own)
    if args.report is not None:
        print(report(args.report, args.top))
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="cpu-census-"))
    code = take(out, pytest_args)
    print(report(out, args.top))
    print(f"\ncensus in {out}; pytest exited {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
