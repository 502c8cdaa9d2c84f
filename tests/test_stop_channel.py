"""The polite stop that needs no console (Windows, pythonw): a stop file every rank watches.

Real child processes watch a real file; the Windows tree is selected through the platform seam with
its Job Object replaced (the Job Object itself is tested in test_windows_seams.py for its layout).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.platform import WINDOWS
from ddpstudio.core.process.proctree import STOP_CHANNEL_ENV, WindowsTree
from ddpstudio.core.protocol import STOP_FILE_ENV
from ddpstudio.rank.stopwatch import AFTER_STOP
from tests.conftest import processes_of
from tests.studio import ENDLESS, SCRIPTS, TINY, events, final, of_type, sigint_at

# A stand-in rank: watches the stop file, then trains "forever"; says how it ended.
RANK = """
import sys, time
from ddpstudio.rank import stopwatch
stopwatch.watch(poll_s=0.05)
print("ready", flush=True)
try:
    while True:
        time.sleep(0.01)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
"""


# The two workloads of a real run: the built-in recipe watches the stop file itself; a user's torchrun-style
# script (SGD by hand, so its ranks skip the optimizer's torch._dynamo import) is watched by the rank helper.
WORKLOADS = pytest.mark.parametrize("workload", [
    [*ENDLESS, *TINY],
    ["--script", str(SCRIPTS / "env_style.py"), "--script-style", "env", "--", "100000"],
], ids=["recipe", "user script"])


def start_rank(stop_file, sigint=signal.SIG_DFL) -> subprocess.Popen:
    """A stand-in rank; SIGINT at ``sigint`` when it starts (the default, unless a test says otherwise)."""
    env = {**os.environ, STOP_FILE_ENV: str(stop_file)}
    proc = subprocess.Popen([sys.executable, "-c", RANK], env=env, stdout=subprocess.PIPE, text=True,
                            **sigint_at(sigint))
    assert proc.stdout.readline().strip() == "ready"
    return proc


class Job:
    """Stands in for the Win32 Job Object: records that the tree ended it, and ends the children."""

    def __init__(self, procs) -> None:
        self.procs, self.terminated = procs, 0

    def terminate(self) -> None:
        self.terminated += 1
        for p in self.procs:
            p.kill()


def test_a_rank_stops_by_keyboard_interrupt_when_the_stop_file_appears(tmp_path):
    stop = tmp_path / "stop-ranks"
    rank = start_rank(stop)
    t0 = time.monotonic()
    stop.touch()
    out, _ = rank.communicate(timeout=10)
    assert (rank.returncode, out.strip()) == (3, "interrupted")
    assert time.monotonic() - t0 < 2.0


@pytest.mark.posix_only("SIGINT's inherited 'ignore' is a POSIX disposition")
def test_a_rank_started_with_sigint_ignored_still_stops_by_the_file(tmp_path):
    """As under ``nohup`` or ``bash run.sh &``: Python keeps the inherited SIG_IGN, and interrupt_main alone would
    do nothing; the watcher gives the rank Python's own handler, so the stop still arrives as KeyboardInterrupt."""
    stop = tmp_path / "stop-ranks"
    rank = start_rank(stop, sigint=signal.SIG_IGN)
    try:
        stop.touch()
        out, _ = rank.communicate(timeout=10)
    finally:
        if rank.poll() is None:
            rank.kill()
            rank.wait(10)
    assert (rank.returncode, out.strip()) == (3, "interrupted")


@pytest.mark.posix_only("dies by SIGINT; Windows exits with STATUS_CONTROL_C_EXIT")
def test_a_stop_asked_before_the_rank_started_stops_it_at_once(tmp_path):
    stop = tmp_path / "stop-ranks"
    stop.touch()
    env = {**os.environ, STOP_FILE_ENV: str(stop)}
    res = subprocess.run([sys.executable, "-c", RANK], env=env, capture_output=True, text=True, timeout=20,
                         **sigint_at(signal.SIG_DFL))
    # KeyboardInterrupt from watch() itself, before the script trained a single step.
    assert res.returncode == -signal.SIGINT and res.stdout == "" and "KeyboardInterrupt" in res.stderr


def test_without_a_stop_file_nothing_is_watched(monkeypatch):
    from ddpstudio.rank import stopwatch

    monkeypatch.delenv(STOP_FILE_ENV, raising=False)
    assert stopwatch.watch() is None


def test_the_windows_tree_asks_through_the_file_and_never_through_os_kill(tmp_path, monkeypatch):
    stop = tmp_path / "stop-ranks"
    ranks = [start_rank(stop), start_rank(stop)]

    def no_console(*_args):  # what CPython 3.11 can do under pythonw (cpython #112190)
        raise SystemError("os.kill without a console")

    monkeypatch.setattr(os, "kill", no_console)
    job = Job(ranks)
    tree = WindowsTree(WINDOWS, stop_file=stop, job=job)
    tree.procs += ranks
    tree.terminate()
    outs = [r.communicate(timeout=10)[0].strip() for r in ranks]
    assert outs == ["interrupted", "interrupted"] and [r.returncode for r in ranks] == [3, 3]
    assert job.terminated == 0  # nobody needed the hard way
    tree.kill()
    assert job.terminated == 1


def stopped_through_the_file(workload: list[str], sigint=signal.SIG_DFL):
    """``ddpstudio run --json`` with the Windows stop channel, Ctrl+C once training runs: (events, exit code).

    The CLI starts with SIGINT at ``sigint`` (the default, as from a terminal, unless a test says otherwise)."""
    env = {**os.environ, STOP_CHANNEL_ENV: "file"}
    cli = subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--json", *workload],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env,
                           **sigint_at(sigint))
    lines = []
    try:
        for line in cli.stdout:
            lines.append(line)
            if '"type":"global_step"' in line or ('"type":"step"' in line and '"step":3' in line):
                break
        cli.send_signal(signal.SIGINT)
        out, _ = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    return events("".join(lines) + out), cli.returncode


@pytest.mark.slow
@WORKLOADS
@pytest.mark.posix_only("SIGINT to a child; Windows needs CTRL_C_EVENT and a shared console")
def test_a_real_run_stops_through_the_file_channel(studio_home, workload):
    """The launcher and two real Gloo ranks, with the POSIX tree asking the Windows way."""
    evs, _ = stopped_through_the_file(workload)
    done = final(evs)
    assert done.get("state") == "stopped", done.data
    run = RunDir.at(of_type(evs, "run_started")[0].get("run_dir"))
    assert run.rank_stop_file.exists()
    codes = {e.rank: e.get("exit_code") for e in of_type(evs, "rank_exited")}
    interrupted = [r for r in (0, 1) if "KeyboardInterrupt" in run.stderr(r).read_text()]
    # Each rank stops by the file (KeyboardInterrupt, exit by SIGINT) unless it is stuck in a native call past
    # the 5 s grace, when the tree's hard stop ends it (seen once at a load average of 8 on 2 cores).
    assert interrupted and all(codes[r] == -signal.SIGINT for r in interrupted), (codes, interrupted)
    assert set(codes) == {0, 1} and all(codes[r] in (-signal.SIGINT, -signal.SIGKILL) for r in codes), codes


@pytest.mark.slow
@WORKLOADS
@pytest.mark.posix_only("SIGINT's inherited 'ignore' is a POSIX disposition")
def test_a_run_started_with_sigint_ignored_stops_through_the_cli_and_the_file(studio_home, workload):
    """``ddpstudio run`` started as ``nohup`` or ``bash run.sh &`` start it (SIGINT ignored, kept by Python): its
    stop path (the SIGINT the CLI takes once the run is under way) and the stop file still end every rank, the
    run ends 'stopped' (exit 3), and nothing is left running."""
    evs, returncode = stopped_through_the_file(workload, sigint=signal.SIG_IGN)
    done = final(evs)
    assert done.get("state") == "stopped" and returncode == 3, done.data
    run = RunDir.at(of_type(evs, "run_started")[0].get("run_dir"))
    codes = {e.rank: e.get("exit_code") for e in of_type(evs, "rank_exited")}
    interrupted = [r for r in (0, 1) if "KeyboardInterrupt" in run.stderr(r).read_text()]
    assert interrupted and all(codes[r] == -signal.SIGINT for r in interrupted), (codes, interrupted)
    assert not processes_of(studio_home)


@pytest.mark.slow
@pytest.mark.posix_only("SIGINT to a child; Windows needs CTRL_C_EVENT and a shared console")
def test_a_script_rank_that_errors_because_its_peer_stopped_first_is_part_of_the_stop(studio_home):
    """Rank 1 leaves at once on the stop; rank 0 finishes its step and meets the gone peer (real Gloo): the
    run was stopped, not failed (CI once called such a stop a failure), and rank 0, whose error came after
    the stop, ends as a stopped rank (SIGINT) with its traceback kept, as the built-in recipe's ranks do."""
    evs, returncode = stopped_through_the_file(["--script", str(SCRIPTS / "peer_gone_on_stop.py"),
                                                "--script-style", "env"])
    codes = {e.rank: e.get("exit_code") for e in of_type(evs, "rank_exited")}
    assert codes == {0: -signal.SIGINT, 1: 0}, codes
    said = [e.get("line") or "" for e in of_type(evs, "log")]
    assert any("finishing its step after the stop" in line for line in said), said
    run = RunDir.at(of_type(evs, "run_started")[0].get("run_dir"))
    stderr = run.stderr(0).read_text()  # the case itself: rank 0 really failed its step after the stop
    assert "Connection closed by peer" in stderr or "Connection reset by peer" in stderr, stderr
    assert stderr.rstrip().endswith(AFTER_STOP), stderr
    done = final(evs)
    assert done.get("state") == "stopped" and done.get("root_cause") is None, done.data
    assert returncode == 3
    assert not processes_of(studio_home)


@pytest.mark.slow
@pytest.mark.posix_only("dies by SIGINT; Windows exits with STATUS_CONTROL_C_EXIT")
def test_a_script_rank_whose_teardown_would_hang_still_ends_by_the_stop(studio_home):
    """The stop's KeyboardInterrupt goes uncaught in a script whose interpreter teardown never ends (as a
    Gloo group's can once a peer is gone): the rank helper ends it as Python would, its atexit handlers
    run, it dies by SIGINT, and the launcher's SIGKILL after the grace period is never needed."""
    evs, returncode = stopped_through_the_file(["--script", str(SCRIPTS / "slow_teardown.py"),
                                                "--script-style", "env"])
    codes = {e.rank: e.get("exit_code") for e in of_type(evs, "rank_exited")}
    assert codes == {0: -signal.SIGINT, 1: -signal.SIGINT}, codes
    ran = {e.rank for e in of_type(evs, "log") if e.get("line") == "atexit handler ran"}
    assert ran == {0, 1}
    assert final(evs).get("state") == "stopped" and returncode == 3
    assert not processes_of(studio_home)


SCRIPT_ERROR = ("import os, sys\n"
                "from ddpstudio.rank import stopwatch\n"
                "stopwatch.watch(poll_s=600)  # what the rank helper starts in a user's script (its watcher\n"
                "stopwatch.end_promptly_when_interrupted()  # looks late here), and this\n"
                "if sys.argv[1] == 'stop':\n"
                "    open(os.environ['DDPSTUDIO_STOP_FILE'], 'w').close()  # asked, before the watcher looked\n"
                "raise RuntimeError('Connection closed by peer [127.0.0.1]:1234')\n")


@pytest.mark.posix_only("dies by SIGINT; Windows exits with STATUS_CONTROL_C_EXIT")
@pytest.mark.parametrize("asked", [True, False], ids=["after the stop", "no stop"])
def test_a_script_error_after_the_stop_ends_the_rank_as_stopped_and_any_other_as_failed(tmp_path, asked):
    """Whichever rank's watcher sees the stop file first, its peer's collective can fail before its own
    watcher looks: that error, uncaught in a user's script, ends the rank as stopped (its traceback kept,
    then the note). The same error with no stop asked is the script's failure: exit 1, no note."""
    env = {**os.environ, STOP_FILE_ENV: str(tmp_path / "stop-ranks")}
    res = subprocess.run([sys.executable, "-c", SCRIPT_ERROR, "stop" if asked else "run"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert "RuntimeError: Connection closed by peer" in res.stderr, res.stderr
    if asked:
        assert res.returncode == -signal.SIGINT and res.stderr.rstrip().endswith(AFTER_STOP), res.stderr
    else:
        assert res.returncode == 1 and AFTER_STOP not in res.stderr, res.stderr


@pytest.mark.posix_only("dies by SIGINT; Windows exits with STATUS_CONTROL_C_EXIT")
def test_a_recipe_rank_whose_collective_fails_after_the_stop_ends_as_stopped(tmp_path):
    """The built-in recipe, asked to stop, then failing because a peer left first: it ends by SIGINT, as a
    stopped rank does, and reports no error (an error event would become the run's root cause)."""
    code = ("import os, sys\n"
            "from ddpstudio.rank import recipe, stopwatch\n"
            "class Trainer:\n"
            "    def __init__(self, *a): pass\n"
            "    def setup(self):\n"
            "        open(os.environ['DDPSTUDIO_STOP_FILE'], 'w').close()  # the launcher's stop, and at once\n"
            "        raise RuntimeError('Connection closed by peer [127.0.0.1]:1234')  # before our watcher looked\n"
            "recipe.Trainer = Trainer\n"
            "recipe.Plan.read = staticmethod(lambda path: type('P', (), {'init_method': 'env://'})())\n"
            "sys.exit(recipe.main(['plan.json']))\n")
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    env = {**os.environ, "DDPSTUDIO_EVENTS_DIR": str(events_dir), "RANK": "0",
           STOP_FILE_ENV: str(tmp_path / "stop-ranks")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == -signal.SIGINT, proc.stderr
    assert "Connection closed by peer" in proc.stderr and "a peer had already stopped" in proc.stderr
    written = "".join(p.read_text() for p in events_dir.iterdir())
    assert '"type":"error"' not in written, written


@pytest.mark.posix_only("dies by SIGINT; Windows exits with STATUS_CONTROL_C_EXIT")
def test_a_stopped_rank_dies_by_sigint_even_with_other_threads_running():
    """stopwatch.exit_interrupted ends the process by SIGINT (the launcher's sign of its own stop), never with
    the OverflowError that os._exit(0xC000013A) raised when another thread took the signal first."""
    code = ("import threading, time\n"
            "from ddpstudio.rank import stopwatch\n"
            "for _ in range(4): threading.Thread(target=lambda: [time.sleep(0.001) for _ in range(10**6)], "
            "daemon=True).start()\n"
            "stopwatch.exit_interrupted()\n")
    for _ in range(5):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert res.returncode == -signal.SIGINT, res.stderr


def test_the_windows_ctrl_c_status_fits_the_int_os_exit_takes():
    from ddpstudio.rank.stopwatch import CONTROL_C_EXIT

    assert CONTROL_C_EXIT & 0xFFFFFFFF == 0xC000013A
    res = subprocess.run([sys.executable, "-c", f"import os; os._exit({CONTROL_C_EXIT})"], capture_output=True,
                         text=True, timeout=60)
    expected = 0xC000013A if sys.platform == "win32" else 0xC000013A & 0xFF  # POSIX keeps the low byte
    assert res.returncode == expected and not res.stderr  # and no OverflowError
