"""The rank helper (ddpstudio/rank/helper/sitecustomize.py) in real interpreters, and the staged all-reduce."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ddpstudio.core.exchange.choice import EXCHANGE_ENV
from ddpstudio.core.launch.commands import rank_helper_dir


def python(code: str, *paths, before=(), **env: str) -> subprocess.CompletedProcess:
    """``python -c code`` with the helper on PYTHONPATH after ``before`` and before ``paths``."""
    path = [*map(str, before), rank_helper_dir(), *map(str, paths), os.environ.get("PYTHONPATH", "")]
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=full)


def test_chains_to_the_sitecustomize_it_shadows_and_loads_nothing_heavy(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("print('their sitecustomize ran')\n")
    res = python("import sys; print(sorted(m for m in ('torch', 'ddpstudio') if m in sys.modules))", tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["their sitecustomize ran", "[]"]


def test_a_broken_chained_sitecustomize_is_one_line_and_the_script_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("raise RuntimeError('their bug')\n")
    res = python("print('script ran')", tmp_path)
    assert res.returncode == 0 and res.stdout == "script ran\n"
    assert res.stderr.count("ddpstudio rank helper:") == 1 and "their bug" in res.stderr


# A profiler's or coverage tool's sitecustomize that, like the helper, runs the one it shadows.
CHAINING = """import os, sys
print("theirs ran", flush=True)
here = os.path.dirname(os.path.abspath(__file__))
where = [os.path.abspath(p or os.curdir) for p in sys.path]
from importlib.machinery import PathFinder
from importlib.util import module_from_spec
rest = sys.path[where.index(here) + 1:]
spec = PathFinder.find_spec("sitecustomize", rest)
if spec is not None:
    spec.loader.exec_module(module_from_spec(spec))
"""


@pytest.mark.parametrize("theirs_first", [True, False])
def test_another_chaining_sitecustomize_runs_once_before_or_after_the_helper(tmp_path, theirs_first):
    (tmp_path / "sitecustomize.py").write_text(CHAINING)
    res = python("print('script ran')", before=[tmp_path]) if theirs_first else python("print('script ran')", tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["theirs ran", "script ran"]
    assert "ddpstudio rank helper" not in res.stderr, res.stderr  # no RecursionError from calling each other


CHECK = ("import torch, torch.distributed as dist, torch.distributed.distributed_c10d as c10d; "
         "ours = lambda f: 'script_hooks' in f.__code__.co_filename; "
         "print(ours(dist.init_process_group), ours(dist.all_reduce), "
         "c10d.all_reduce is dist.all_reduce, c10d.init_process_group is dist.init_process_group)")


@pytest.mark.slow
def test_staged_wraps_all_reduce_and_native_only_the_reports(settles_plain):
    staged = python(CHECK, **{EXCHANGE_ENV: "staged"})
    assert staged.returncode == 0, staged.stderr
    assert staged.stdout.split() == ["True", "True", "True", "True"]
    native = python(CHECK, **{EXCHANGE_ENV: "native"})
    assert native.stdout.split() == ["True", "False", "True", "True"], native.stderr
    plain = settles_plain  # SETTLES' first line is CHECK's, in an interpreter without the helper
    assert plain.stdout.split()[:2] == ["False", "False"], "without the helper torch stays untouched"


RANK = """
import sys, torch, torch.distributed as dist
from ddpstudio.rank.staged import staged_all_reduce
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method=sys.argv[2], rank=rank, world_size=2)
t = torch.full((5,), float(rank + 1))
assert staged_all_reduce(t) is None and t.tolist() == [3.0] * 5
u = torch.full((3,), float(rank + 1))
work = staged_all_reduce(u, async_op=True)
assert work.wait() and u.tolist() == [3.0] * 3
v = torch.full((2,), 2.0 * (rank + 1))
fut = staged_all_reduce(v, dist.ReduceOp.MAX, async_op=True).get_future()
assert fut.wait()[0] is v and v.tolist() == [4.0, 4.0]
dist.destroy_process_group()
print("ok")
"""


@pytest.mark.slow
def test_staged_all_reduce_sync_async_and_future_in_a_real_gloo_group(tmp_path):
    url = (tmp_path / "store").as_uri()
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(r), url], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert [o[0] for o in outs] == ["ok\n", "ok\n"]


@pytest.mark.posix_only("the lifeline pipe is POSIX's; Windows ranks die with the launcher's Job Object")
def test_the_helper_watches_the_launchers_lifeline_without_importing_our_packages():
    """A user script's rank dies (with its process group) when the lifeline's write end closes."""
    from ddpstudio.core.protocol import LIFELINE_FD_ENV
    from ddpstudio.rank import lifeline

    assert lifeline.LIFELINE_FD_ENV == LIFELINE_FD_ENV  # the helper loads lifeline.py alone: no import of ours
    read_fd, write_fd = os.pipe()
    code = ("import sys, threading, time; "
            "print(sorted(m for m in ('torch', 'ddpstudio') if m in sys.modules), "
            "[t.name for t in threading.enumerate() if t.name == 'ddpstudio-lifeline'], flush=True); "
            "time.sleep(60)")
    env = {**os.environ, LIFELINE_FD_ENV: str(read_fd),
           "PYTHONPATH": os.pathsep.join([rank_helper_dir(), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, pass_fds=(read_fd,), stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    os.close(read_fd)
    try:
        assert proc.stdout.readline().strip() == "[] ['ddpstudio-lifeline']"
        os.close(write_fd)  # the launcher is gone
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


SETTLES = CHECK + """
import atexit, sys, time, torch.distributed as dist
atexit.register(lambda: print(f"exit handler after {time.monotonic() - END[0]:.3f}", flush=True))
END = [0.0]
dist.init_process_group("gloo", init_method=sys.argv[1], rank=0, world_size=1)
dist.destroy_process_group()
END[0] = time.monotonic()
"""


@pytest.fixture(scope="module")
def settles_plain(tmp_path_factory) -> subprocess.CompletedProcess:
    """SETTLES run once without the helper (a rank of a one-rank Gloo group): its first line says torch was left
    untouched, its last how long its exit handler waited. Two tests read it: one interpreter, one torch import."""
    folder = tmp_path_factory.mktemp("settles-plain")
    script = folder / "settles.py"
    script.write_text(SETTLES)
    return subprocess.run([sys.executable, str(script), (folder / "pg").as_uri()], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.slow
def test_a_gloo_rank_lets_its_worker_threads_finish_before_the_interpreter_shuts_down(tmp_path, settles_plain):
    """rank/gloo_exit.py: a rank that used Gloo waits SETTLE_S in an exit hook (registered when it joined, so
    before the script's earlier hooks and before finalization) instead of aborting when a Gloo worker frees
    a finished all-reduce during finalization (pytorch PR #179291, abandoned)."""
    from ddpstudio.rank.gloo_exit import SETTLE_S

    store = (tmp_path / "pg").as_uri()
    script = tmp_path / "settles.py"
    script.write_text(SETTLES)
    with_helper = subprocess.run([sys.executable, str(script), store], capture_output=True, text=True, timeout=120,
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                     [rank_helper_dir(), os.environ.get("PYTHONPATH", "")])})
    assert with_helper.returncode == 0, with_helper.stderr
    waited = float(with_helper.stdout.split()[-1])
    assert waited >= SETTLE_S, with_helper.stdout
    plain = settles_plain
    assert plain.returncode == 0 and float(plain.stdout.split()[-1]) < SETTLE_S, plain.stdout + plain.stderr
