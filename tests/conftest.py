"""Shared fixtures: a private DDP Studio home per test, and the no-leftover-process check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import psutil
import pytest

from tests import machine, parallel

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
# Every wait on a real process ends before pytest-timeout's 300 s (pyproject.toml). On Windows
# pytest-timeout has no SIGALRM: its thread method ends the whole run with os._exit(1) at 300 s, so a
# test's own deadline below that is what makes a slow or stuck process fail that one test alone.
PROCESS_DEADLINE_S = 240.0


@pytest.fixture(scope="session")
def app_wheel(tmp_path_factory) -> Path:
    """The app's wheel, built from the checkout once a session for the tests that install or ship it: each
    ``pip wheel`` sets up an isolated build environment (about 8 s of CPU, 28 s at load 7)."""
    sys.path.insert(0, str(REPO / "installer"))
    import build  # installer/build.py (installer/ is not a package)

    return build.build_wheel(tmp_path_factory.mktemp("app-wheel"))


@contextmanager
def killed_after(proc: subprocess.Popen, seconds: float = PROCESS_DEADLINE_S, what: str = "the process"):
    """Kill ``proc`` at the deadline, which also ends a loop blocked reading its output; the test then
    fails, saying so. For waits that take no timeout (``for line in proc.stdout``, ``readline()``)."""
    fired = threading.Event()

    def kill() -> None:
        if proc.poll() is None:
            fired.set()
            proc.kill()

    timer = threading.Timer(seconds, kill)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
    if fired.is_set():
        pytest.fail(f"{what} (pid {proc.pid}) was still running after {seconds:g} s: killed")


def processes_of(home: Path) -> list[psutil.Process]:
    """Processes started under this test's DDP Studio home (found by environment or command line)."""
    me = os.getpid()
    marker = str(home)
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == me:
            continue
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if marker in cmdline or proc.environ().get("DDPSTUDIO_HOME") == marker:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _alive(proc: psutil.Process) -> bool:
    """Not ended: neither gone nor a zombie its parent has yet to reap."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def live_processes_of(home: Path) -> list[psutil.Process]:
    """``processes_of(home)`` less those already ended."""
    return [proc for proc in processes_of(home) if _alive(proc)]


def assert_none_left(home: Path, grace_s: float = 10) -> None:
    """Fails if a process of ``home`` is still running after ``grace_s``, and kills what is left either way."""
    leftovers = live_processes_of(home)
    deadline = time.monotonic() + grace_s
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.1)
        leftovers = [p for p in leftovers if _alive(p)]
    described = [f"{p.pid} {' '.join(p.cmdline()[:6])}" for p in leftovers if p.is_running()]
    for proc in leftovers:
        try:
            proc.kill()
        except psutil.Error:
            pass
    assert not described, f"processes left running after the test: {described}"


def pytest_collection_modifyitems(config, items) -> None:
    """``@pytest.mark.posix_only("why")`` tests skip on Windows with that reason. On a worker of ``-n``,
    the heaviest files come first (tests/parallel.py)."""
    if hasattr(config, "workerinput"):
        parallel.heaviest_first(items)
    if sys.platform != "win32":
        return
    for item in items:
        mark = item.get_closest_marker("posix_only")
        if mark is not None:
            item.add_marker(pytest.mark.skip(reason=f"POSIX only: {mark.args[0] if mark.args else 'see the test'}"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int | None:
    """``-n auto``: one worker more than the cores (xdist's own count; ``--maxprocesses`` still caps it).
    About a quarter of the suite's time is spent waiting (rendezvous and heartbeat timeouts, killed peers,
    Wine), when one worker per core leaves a core idle: on 2 cores, the same commit's tests took 704.6 s
    with 2 workers and 631.8 s with 3 (docs/testing.md). PYTEST_XDIST_AUTO_NUM_WORKERS, when set, is left
    to xdist."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = psutil.cpu_count(logical=False) or psutil.cpu_count() or 1
    return cores + 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``-n N``: whole files per worker, heaviest first (tests/parallel.py); an explicit ``--dist`` other
    than load, loadfile or loadscope is kept."""
    if config.getoption("dist") in ("load", "loadfile", "loadscope"):
        return parallel.scheduler(config, log)
    return None


def pytest_runtestloop(session) -> None:
    """The Wine tier's runtime is built (or found in its cache) before the first test, outside every
    test's time limit: a cold build takes minutes (the Wine tests' own limit is 400 s)."""
    if session.config.option.collectonly or not any(item.get_closest_marker("wine") for item in session.items):
        return
    from tests import wine

    if wine.missing() is None:
        wine.build_runtime()


# What check_request caches in the data folder: torchvision's model list and resnet18's verdict at the
# default 32 pixels. Computing them imports torchvision (about 1.7 s on top of torch on an idle 2-core
# machine, 3 s at load average 4) and builds the model on the meta device, in every `ddpstudio run` of a
# fresh home.
WARM_CACHE_CODE = ("from ddpstudio.core.validate import classification_models; "
                   "from ddpstudio.core.imagesize import image_size_problem; "
                   "classification_models(); image_size_problem('resnet18', 32)")


def is_controller(config) -> bool:
    """The process that hands tests to ``-n`` workers and runs none itself."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


_warming: tuple[subprocess.Popen, Path] | None = None  # the warm cache's child, started with the session


def pytest_sessionstart(session) -> None:
    """Start computing the warm cache before collection: the two overlap (about 6 s and 10 s on an idle
    2-core machine), rather than the first test waiting for both in turn."""
    global _warming
    if is_controller(session.config):
        return  # the workers run the tests and compute their own
    home = Path(tempfile.mkdtemp(prefix="ddpstudio-warm-cache-"))
    proc = subprocess.Popen([PYTHON, "-c", WARM_CACHE_CODE], env={**os.environ, "DDPSTUDIO_HOME": str(home)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _warming = proc, home


def pytest_sessionfinish(session, exitstatus) -> None:
    """A session that needed no warm cache (collection only, or no test left) ends its child too."""
    if _warming is not None:
        proc, home = _warming
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def warm_cache(tmp_path_factory) -> Path:
    """The data folder's ``cache`` as the first real ``ddpstudio run`` leaves it, computed once per session
    by the product's own code in a child process (the pytest process stays free of torchvision)."""
    cache = tmp_path_factory.mktemp("warm-cache-home") / "cache"
    if _warming is not None:
        proc, home = _warming
        try:
            proc.wait(PROCESS_DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        # Where torchvision cannot be imported the cache stays empty and every home starts cold, as before;
        # test_warm_cache.py then fails, naming the missing file.
        if (home / "cache").is_dir():
            shutil.copytree(home / "cache", cache)
    cache.mkdir(exist_ok=True)
    return cache


def seed_cache(home: Path, cache: Path) -> Path:
    """Give a fresh DDP Studio home the warm cache, as a user's second launch finds it; returns ``home``.
    Models and sizes not in it are still probed (and cached) by the run, as on a first launch."""
    shutil.copytree(cache, Path(home) / "cache", dirs_exist_ok=True)
    return Path(home)


@pytest.fixture(autouse=True)
def studio_home(tmp_path_factory, monkeypatch, warm_cache) -> Path:
    """Every test gets its own data directory, so runs, stores and the registry never mix. It starts with
    the warm cache (``seed_cache``); the cold path is each session's first probe and test_warm_cache.py."""
    home = seed_cache(tmp_path_factory.mktemp("home"), warm_cache)
    monkeypatch.setenv("DDPSTUDIO_HOME", str(home))
    yield home
    assert_none_left(home)


# The plain run that several files only read: two ranks of the built-in perceptron on a FileStore, checkpointed at
# its end. test_run_e2e checks how it trains and resumes it over a TCP store, test_recipe_speed reads the defaults
# it states, test_exchange_e2e compares the staged exchange with it. A two-rank run costs 12-15 s of CPU before its
# first step (docs/testing.md, "Where the CPU goes"): three runs of it cost 26-30 s more than one.
SHARED_RUN_STEPS = 30
# Batch 16 at lr 0.02: the perceptron's mean loss over the last 5 of 30 steps is under half that of the first 5.
PERCEPTRON = ["--model", "mlp", "--image-size", "8", "--batch-size", "16", "--lr", "0.02"]


class SharedRun(NamedTuple):
    """The shared run's home and checkpoint folder (read them, never write: other workers' tests read them too),
    and what its ``ddpstudio run --json`` returned."""

    home: Path
    checkpoint_dir: Path
    result: subprocess.CompletedProcess


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory, warm_cache) -> SharedRun:
    """The shared run, started once per pytest run. Under ``-n`` each worker has its own session: the first
    that needs the run starts it, the others wait on a lock and read what it left (pytest-xdist's docs,
    "Making session-scoped fixtures execute only once")."""
    from filelock import FileLock  # a dependency of torch; imported only where the run is needed

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this pytest run's folder, above each worker's own (popen-gw0, popen-gw1)
    home, record = root / "shared-run-home", root / "shared-run.json"
    with FileLock(str(root / "shared-run.lock"), timeout=PROCESS_DEADLINE_S):
        if not record.exists():
            seed_cache(home, warm_cache)
            args = [PYTHON, "-m", "ddpstudio", "run", "--json", *PERCEPTRON, "--max-steps", str(SHARED_RUN_STEPS),
                    "--checkpoint-dir", str(home / "ckpt")]
            with pytest.MonkeyPatch.context() as patch:
                if machine.has_gpus():  # as gpus_only_where_asked does for a test, whose fixtures come after this
                    machine.hide_gpus(patch, root)
                res = subprocess.run(args, capture_output=True, text=True, timeout=PROCESS_DEADLINE_S,
                                     stdin=subprocess.DEVNULL, env={**os.environ, "DDPSTUDIO_HOME": str(home)})
            assert_none_left(home)
            record.write_text(json.dumps({"args": args, "returncode": res.returncode, "stdout": res.stdout,
                                          "stderr": res.stderr}), encoding="utf-8")
        done = json.loads(record.read_text(encoding="utf-8"))
    return SharedRun(home, home / "ckpt", subprocess.CompletedProcess(**done))


@pytest.fixture(scope="session")
def no_gpu_folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("no-gpu")


@pytest.fixture(autouse=True)
def gpus_only_where_asked(request, monkeypatch, no_gpu_folder):
    """On a machine with NVIDIA GPUs, a test not marked ``real_gpus`` sees a machine without them
    (tests/machine.py): it tests the CPU path, which the GPU would otherwise replace or refuse."""
    if request.node.get_closest_marker("real_gpus") is None and machine.has_gpus():
        machine.hide_gpus(monkeypatch, no_gpu_folder)
    yield


@pytest.fixture(autouse=True)
def collected_between_tests():
    """Once a window has switched the cycle collector to the GUI thread's timer, tests with no event
    loop would never collect: collect what is due after each test, on the main thread."""
    yield
    gui_gc = sys.modules.get("ddpstudio.gui.gui_thread_gc")
    collector = gui_gc.current() if gui_gc is not None else None
    if collector is not None:
        collector.collect_due()
