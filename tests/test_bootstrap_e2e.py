"""The bootstrap end to end on Linux, the way the installer runs it on Windows.

A temporary folder plays ``%LOCALAPPDATA%\\Programs\\DDPStudio``: the Linux uv
(from uv's wheel, as the build takes uv.exe from the Windows one), the app
wheel built from this checkout, and a bootstrap venv holding only that wheel.
Then ``python -m ddpstudio.bootstrap setup`` installs the pinned torch from
the package registry configured for pip, and the installed app's
``ddpstudio doctor --json`` must run. Differences from Windows, by design:
this machine's Python instead of one uv downloads (no github.com here), and
the registry's torch instead of PyTorch's index (``--torch-index``).
uv's cache (``UV_CACHE_DIR``, else ~/.cache/uv) makes repeat runs fast.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import psutil
import pytest

from ddpstudio.bootstrap import launch, record
from ddpstudio.bootstrap.failure import Problem
from ddpstudio.bootstrap.layout import Layout
from ddpstudio.core.platform import current
from ddpstudio.gui.app import READY_FILE_ENV

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "installer"))

import build  # noqa: E402
import uvbinary  # noqa: E402

PLATFORM = current()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        platform.machine().lower() not in ("x86_64", "amd64") or PLATFORM.system not in ("linux", "windows"),
        reason="uv wheels are fetched for x86_64 Linux and Windows",
    ),
]
BUILD_DIR = REPO / "build" / "installer"
UV_TAG = uvbinary.WINDOWS if PLATFORM.is_windows else uvbinary.LINUX


def base_python() -> str:
    """This machine's real interpreter (not the test venv's), for the new venvs."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


@functools.cache
def _pip_sources() -> tuple[str, ...]:
    """pip's configured extra indexes and find-links as bootstrap flags (uv reads no pip config).
    The first local index that carries torch becomes the torch index. Read once (``pip config list``
    costs about 0.7 s); the tests that need them take a fresh list."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60).stdout
    values: dict[str, list[str]] = {"extra-index-url": [], "find-links": []}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name in values:
            values[name] += value.strip().strip("'\"").split()
    values["find-links"] += os.environ.get("PIP_FIND_LINKS", "").split()
    extras = list(dict.fromkeys(values["extra-index-url"]))
    torch_index = next(
        (u for u in extras if u.startswith("file://") and (Path(urlparse(u).path) / "torch").is_dir()),
        "https://pypi.org/simple",  # PyPI's Linux torch is a CUDA build: it runs on the CPU
    )
    flags = ["--torch-index", torch_index]
    for url in extras:
        if url != torch_index:
            flags += ["--extra-index-url", url]
    for link in dict.fromkeys(values["find-links"]):
        flags += ["--find-links", link]
    # This machine's mirror splits one package's versions over several indexes (PySide6 6.11.3 is
    # only on the registry); uv otherwise takes the first index that has the name at all.
    flags += ["--index-strategy", "unsafe-best-match"]
    return tuple(flags)


def pip_sources() -> list[str]:
    return list(_pip_sources())


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DDPSTUDIO_BOOTSTRAP", "DDPSTUDIO_TORCH", "VIRTUAL_ENV"))}
    env["UV_CACHE_DIR"] = os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv")
    return env


def run(cmd: list[str], timeout: float = 600, env: dict[str, str] | None = None,
        **kwargs) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env or child_env(), timeout=timeout,
                          **kwargs)
    assert psutil.Process().children(recursive=True) == []
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory, app_wheel) -> Layout:
    """An installation folder after the installer's file copy and Python step."""
    layout = Layout(tmp_path_factory.mktemp("DDPStudio"), PLATFORM)
    shutil.copy2(uvbinary.uv_binary(UV_TAG, BUILD_DIR / "uv-cache"), layout.uv)
    layout.wheels_dir.mkdir(parents=True, exist_ok=True)
    wheel = shutil.copy2(app_wheel, layout.wheels_dir / app_wheel.name)  # the installer ships it there
    # installer/ddpstudio.nsi, PrepareBootstrapPython: a venv with only the app wheel.
    for cmd in (
        [layout.uv, "venv", "--no-config", "--python", base_python(), layout.bootstrap_env],
        [layout.uv, "pip", "install", "--no-config", "--python", layout.python(layout.bootstrap_env), "--no-deps", wheel],
    ):
        proc = run(cmd)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return layout


def bootstrap(layout: Layout, action: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """What the installer (silent) and the Repair shortcut run, headless."""
    return run([layout.python(layout.bootstrap_env), "-m", "ddpstudio.bootstrap", action, "--root", layout.root,
                "--no-window", "--python", base_python(), *flags])


def test_bootstrap_venv_has_no_dependencies(installed):
    """The bootstrap runs before torch, Qt or psutil exist: its venv holds only our wheel."""
    code = "import importlib.util as u; print([m for m in ('torch', 'PySide6', 'psutil', 'platformdirs') if u.find_spec(m)])"
    proc = run([installed.python(installed.bootstrap_env), "-c", code])
    assert proc.stdout.strip() == "[]"


def test_setup_end_to_end_then_doctor(installed):
    started = time.monotonic()
    # The driver seam pins "no driver": on a GPU machine the table would pick
    # a CUDA build and the check would demand CUDA from whatever torch
    # --torch-index serves. (The real NVML reading: test_bootstrap_cuda_index.)
    proc = bootstrap(installed, "setup", "--cuda-driver", "none", *pip_sources())
    took = time.monotonic() - started
    print(f"\nbootstrap setup took {took:.1f} s")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    for step in ("[1/5]", "[3/5] Downloading and installing PyTorch", "[5/5] Saving the setup", "DDP Studio is set up."):
        assert step in proc.stdout

    data = record.read(installed.record)
    assert data is not None
    assert data["build"] == "cpu" and data["index_overridden"] is True  # no NVIDIA driver here
    assert data["torch"].startswith("2.14.1") and data["gloo"] is True and data["cuda_available"] is False
    assert data["app_version"] == build.package_version()
    # The probe ran in the new environment (no CUDA here) and left its answer for the app.
    assert data["gloo_cuda_all_reduce"]["outcome"] == "not applicable", data["gloo_cuda_all_reduce"]
    assert launch.is_ready(installed)
    assert (installed.log_file).read_text().count("DDP Studio is set up.") == 1

    doctor = run([installed.script(installed.env, "ddpstudio"), "doctor", "--json"], timeout=300)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    report = json.loads(doctor.stdout)
    assert report["ddpstudio"] == build.package_version()
    assert report["platform"] == PLATFORM.name and report["python"] == data["python"]
    assert "2.14.1" in json.dumps(report)  # the installed torch is the one doctor sees
    assert report["choice"]["backend"] == "gloo"  # CPU-only machine
    fact = report["gloo_cuda_all_reduce"]
    assert fact["outcome"] == "not applicable" and fact["from_cache"] is True  # the installer's probe, reused


def _alive(proc: psutil.Process) -> bool:
    return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE


def test_launch_opens_the_installed_window(installed, tmp_path):
    """What the Start-menu shortcut runs: set up already, so it starts ddpstudio-gui and returns."""
    gui = str(installed.script(installed.env, "ddpstudio-gui"))
    ready = tmp_path / "window-ready.json"
    proc = run([installed.python(installed.bootstrap_env), "-m", "ddpstudio.bootstrap", "launch", "--root", installed.root,
                "--no-window"], timeout=120, env={**child_env(), READY_FILE_ENV: str(ready)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[1/5]" not in proc.stdout  # no setup ran

    def window_processes() -> list[psutil.Process]:
        found = []
        for candidate in psutil.process_iter(["cmdline"]):
            if gui in (candidate.info["cmdline"] or []):
                found.append(candidate)
        return found

    deadline = time.monotonic() + 20
    while not window_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    started = window_processes()
    assert started, "the launcher did not start ddpstudio-gui"
    try:
        deadline = time.monotonic() + 90  # the window's imports (torch, pyqtgraph) on a loaded 2-core machine
        while not ready.exists() and time.monotonic() < deadline and all(_alive(p) for p in started):
            time.sleep(0.2)
        assert all(_alive(p) for p in started), "ddpstudio-gui exited before its window was up"
        assert ready.exists(), "ddpstudio-gui did not show its window within 90 s"
        assert json.loads(ready.read_text())["pid"] in {p.pid for p in started}
    finally:
        for p in started:  # detached from us (its own session), so we end it ourselves
            p.kill()
        psutil.wait_procs(started, timeout=10)
    assert window_processes() == []


def test_repair_builds_again(installed):
    before = record.read(installed.record)
    assert before is not None
    (installed.env / "marker").write_text("removed by a repair")
    proc = bootstrap(installed, "repair", "--cuda-driver", "none", *pip_sources())
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    assert f"Removing {installed.env}" in proc.stdout
    assert not (installed.env / "marker").exists()
    after = record.read(installed.record)
    assert after is not None and after["created"] >= before["created"] and launch.is_ready(installed)


def test_a_changed_build_starts_from_an_empty_environment(installed):
    """uv would keep the installed torch (same version, other build): a build change rebuilds the env."""
    data = record.read(installed.record)
    assert data is not None
    record.write(installed.record, {**data, "build": "cu128"})  # as if set up before a driver change
    (installed.env / "marker").write_text("removed when the build changes")
    proc = bootstrap(installed, "setup", "--cuda-driver", "none", *pip_sources())
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    assert "The PyTorch build changes (cu128 -> cpu)" in proc.stdout
    assert not (installed.env / "marker").exists()
    assert record.read(installed.record)["build"] == "cpu" and launch.is_ready(installed)


def test_a_newer_wheel_means_not_ready(installed, tmp_path):
    newer = installed.wheels_dir / "ddpstudio-99.0-py3-none-any.whl"
    newer.write_bytes(b"")
    try:
        assert installed.app_wheel() == newer
        assert not launch.is_ready(installed)  # the launcher would set up again
    finally:
        newer.unlink()
    assert launch.is_ready(installed)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_no_network(installed, tmp_path):
    """uv cannot reach any index: a plain message, exit code 3, and a stale record removed."""
    dead = f"http://127.0.0.1:{_closed_port()}/simple"
    root = tmp_path / "DDPStudio"
    stale = Layout(root, PLATFORM).record
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps({"app_version": "0.0.1"}))
    env_flags = ["--uv", str(installed.uv), "--wheel", str(installed.app_wheel())]
    proc = run([sys.executable, "-m", "ddpstudio.bootstrap", "setup", "--root", root, "--no-window", "--python", base_python(),
                "--torch-index", dead, "--default-index", dead, *env_flags],
               timeout=300)
    assert proc.returncode == Problem.NETWORK.exit_code, proc.stdout[-3000:] + proc.stderr
    message = proc.stderr.strip().splitlines()[-1]
    assert message.startswith("DDP Studio could not download") and "Retry" in message
    assert not stale.exists()  # nothing half-installed stays marked as set up
