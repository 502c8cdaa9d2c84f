"""Ctrl+C (a real SIGINT to the real CLI) at any moment ends with exit 3, no traceback, nothing left running."""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
import time

import psutil

import pytest

from ddpstudio.core import protocol
from tests.conftest import processes_of
from tests.studio import ENDLESS, TINY, sigint_at

pytestmark = [pytest.mark.slow, pytest.mark.posix_only("SIGINT to a child; Windows needs CTRL_C_EVENT and a shared console")]
STOPPED = protocol.EXIT_CODES["stopped"]


def _cli(*extra: str) -> subprocess.Popen:
    """The CLI as a terminal starts it: SIGINT at its default, whatever pytest inherited."""
    return subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", *ENDLESS, *TINY, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            **sigint_at(signal.SIG_DFL))


def _interrupt(cli: subprocess.Popen, *pauses: float) -> str:
    """Ctrl+C after each pause; the CLI's stderr once it has ended."""
    try:
        for pause in pauses:
            time.sleep(pause)
            cli.send_signal(signal.SIGINT)
        return cli.communicate(timeout=60)[1]
    finally:
        if cli.poll() is None:
            cli.kill()


def _assert_stopped_cleanly(cli: subprocess.Popen, err: str, home) -> None:
    assert cli.returncode == STOPPED, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert not processes_of(home)


@functools.cache
def _python_start_cpu() -> float:
    """CPU seconds this machine's interpreter spends before any code of ours can run (``site`` imported).

    Measured as a bare ``python -c pass`` costs here (startup and exit, so a little more than the start)."""
    before = psutil.Process().cpu_times()
    subprocess.run([sys.executable, "-c", "pass"], check=True, stdin=subprocess.DEVNULL)
    after = psutil.Process().cpu_times()
    return (after.children_user + after.children_system) - (before.children_user + before.children_system)


def _past_python_start(cli: subprocess.Popen, after_s: float) -> None:
    """Wait ``after_s`` seconds, and at least until the CLI's interpreter has done its own start.

    Before ``site`` is imported no code of ours has run: CPython then ends with "Fatal Python error:
    init_import_site" (its own behaviour, e.g. b-ryan/powerline-shell #445) or a traceback from inside
    ``site``. On a loaded machine 0.15 s of wall time can fall there (CI-like run 6: the SIGINT landed in
    the editable install's ``.pth`` finder), so the clock that says "past Python's start" is the CLI's own
    CPU time, which load does not stretch."""
    start, proc, need = time.monotonic(), psutil.Process(cli.pid), _python_start_cpu()
    time.sleep(after_s)
    deadline = start + 30
    while time.monotonic() < deadline and cli.poll() is None:
        cpu = proc.cpu_times()
        if cpu.user + cpu.system >= need:
            return
        time.sleep(0.005)


@pytest.mark.parametrize("after_s", [0.15, 0.4, 0.7, 1.0])
def test_ctrl_c_in_the_first_second_ends_with_exit_3_and_no_traceback(studio_home, after_s):
    cli = _cli()
    _past_python_start(cli, after_s)
    _assert_stopped_cleanly(cli, _interrupt(cli, 0), studio_home)


def test_a_second_ctrl_c_during_the_stop_still_ends_with_exit_3(studio_home):
    cli = _cli("--json")
    for line in cli.stdout:
        if '"type":"global_step"' in line:
            break
    # Impatient: again and again, every 0.15 s while the ranks are being stopped and as the CLI exits.
    _assert_stopped_cleanly(cli, _interrupt(cli, 0, *[0.15] * 12), studio_home)



def _main_with(command_body: str) -> subprocess.CompletedProcess:
    """``ddpstudio run`` through the real ``cli.main``, its command replaced by ``command_body``."""
    code = ("import signal, sys\n"
            "from ddpstudio.cli import main as cli\n"
            "def command(argv=None):\n" + command_body +
            "cli._main = command\n"
            "sys.exit(cli.main(['run']))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, **sigint_at(signal.SIG_DFL))


def test_ctrl_c_that_a_library_swallows_and_turns_into_another_error_still_ends_as_stopped():
    """The interrupt hit a library's import, which swallowed it and then failed otherwise (numpy under
    torch's import, seen once: "ImportError: cannot load module more than once per process", exit 1 with a
    traceback). The user asked to stop: exit 3, one line, no traceback."""
    res = _main_with("    try:\n"
                     "        signal.raise_signal(signal.SIGINT)  # Ctrl+C, in the middle of a library's import\n"
                     "    except KeyboardInterrupt:\n"
                     "        pass  # the library swallows it\n"
                     "    raise ImportError('cannot load module more than once per process')\n")
    assert res.returncode == STOPPED, res.stderr
    assert "Traceback" not in res.stderr and "ddpstudio: stopped (Ctrl+C)" in res.stderr


def test_an_error_without_ctrl_c_is_not_called_a_stop():
    res = _main_with("    raise ImportError('a real import error')\n")
    assert res.returncode == 1 and "ImportError: a real import error" in res.stderr
    assert "stopped" not in res.stderr


def test_ctrl_c_that_a_library_swallows_during_planning_starts_no_run():
    """The interrupt swallowed whole (torch's import can: the run then trained on, 1 in 16 tries at
    0.4-0.6 s): the run is not started, exit 3. The session is replaced to count what would start."""
    res = _main_with("    import argparse\n"
                     "    import ddpstudio.core.launch.session as session\n"
                     "    started = []\n"
                     "    session.Session = lambda *a, **k: started.append(a)\n"
                     "    try:\n"
                     "        signal.raise_signal(signal.SIGINT)\n"
                     "    except KeyboardInterrupt:\n"
                     "        pass  # swallowed, and planning went on\n"
                     "    from ddpstudio.cli.run import _launch\n"
                     "    try:\n"
                     "        return _launch(object(), argparse.Namespace(json=True))\n"
                     "    finally:\n"
                     "        print('runs started:', len(started), flush=True)\n")
    assert res.returncode == STOPPED, res.stderr
    assert res.stdout.strip() == "runs started: 0" and "Traceback" not in res.stderr


# A Ctrl+C that lands in a weakref callback (importlib's module locks have one): Python cannot raise it there.
_IN_A_CALLBACK = """
import os, signal, time, weakref
from ddpstudio.cli import main as cli
cli.take_ctrl_c()
class Held: pass
held = Held()
def callback(_):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)  # the handler runs here, inside the callback
ref = weakref.ref(held, callback)
del held
print("stop kept:", cli.interrupted_earlier(), flush=True)
"""


def test_a_ctrl_c_python_cannot_raise_is_kept_without_a_traceback():
    proc = subprocess.run([sys.executable, "-c", _IN_A_CALLBACK], capture_output=True, text=True, timeout=60,
                          **sigint_at(signal.SIG_DFL))
    assert proc.stdout.strip() == "stop kept: True", proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
