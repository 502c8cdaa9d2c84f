"""Shared fixtures: a private DDP Studio home per test, and the no-leftover-process check."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


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


def pytest_collection_modifyitems(config, items) -> None:
    """``@pytest.mark.posix_only("why")`` tests skip on Windows with that reason."""
    if sys.platform != "win32":
        return
    for item in items:
        mark = item.get_closest_marker("posix_only")
        if mark is not None:
            item.add_marker(pytest.mark.skip(reason=f"POSIX only: {mark.args[0] if mark.args else 'see the test'}"))


@pytest.fixture(autouse=True)
def studio_home(tmp_path_factory, monkeypatch) -> Path:
    """Every test gets its own data directory, so runs, stores and the registry never mix."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("DDPSTUDIO_HOME", str(home))
    yield home
    leftovers = processes_of(home)
    deadline = time.monotonic() + 10
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.1)
        leftovers = [p for p in leftovers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    described = [f"{p.pid} {' '.join(p.cmdline()[:6])}" for p in leftovers if p.is_running()]
    for proc in leftovers:
        try:
            proc.kill()
        except psutil.Error:
            pass
    assert not described, f"processes left running after the test: {described}"


@pytest.fixture(autouse=True)
def collected_between_tests():
    """Once a window has switched the cycle collector to the GUI thread's timer, tests with no event
    loop would never collect: collect what is due after each test, on the main thread."""
    yield
    gui_gc = sys.modules.get("ddpstudio.gui.gui_thread_gc")
    collector = gui_gc.current() if gui_gc is not None else None
    if collector is not None:
        collector.collect_due()
