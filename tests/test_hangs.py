"""Issue 25 §3, for real: a rank stuck mid-training is named (rank, step, phase), its stack dumped to its log.

Each run is a user's script (tests/scripts/hang_in_step.py: a tiny MLP under
DDP, 2 Gloo ranks on the CPU) through the real CLI with a 5 s hang timeout;
rank 1 hangs at step 5, rank 0 waits for it in the gradient exchange.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.hangs import RunHangs
from ddpstudio.core.launch.hangwatch import PHASE_WORDS, HangWatch, beat_file, dump_request
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.platform import WINDOWS
from tests.conftest import killed_after, processes_of
from tests.studio import ENDLESS, SCRIPTS, TINY, ddpstudio, events, final, kill_left, of_type, sigint_at

pytestmark = pytest.mark.slow
HANG = ["--hang-timeout", "5", "--rendezvous-timeout", "60"]


def _hung_run(mode: str, *options: str, steps: int = 5):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "hang_in_step.py"), "--script-style", "env", *HANG,
                    *options, "--", mode, str(steps))
    return res, events(res.stdout)


@pytest.mark.parametrize("mode, phase, words", [
    ("sleep", "script", "rank 1 stuck in the script's own code at step 5"),
    ("worker", "data", "rank 1 stuck in the data loader at step 5"),
])
def test_a_stuck_rank_is_named_its_stack_dumped_and_on_hang_stop_ends_the_run_failed(studio_home, mode, phase, words):
    res, evs = _hung_run(mode, "--on-hang", "stop")
    done = final(evs)
    assert res.returncode == protocol.EXIT_CODES[protocol.FAILED], (done.data, res.stderr[-2000:])
    assert done.get("state") == protocol.FAILED
    [stuck] = of_type(evs, protocol.RANK_STUCK)
    assert (stuck.rank, stuck.get("step"), stuck.get("phase"), stuck.get("waiting")) == (1, 5, phase, [0])
    assert 5 <= stuck.get("still_s") < 30, stuck.data
    assert stuck.get("message").startswith(words + ": no progress for ")
    assert done.get("summary") == words
    assert done.get("root_cause")["rank"] == 1
    # Named soon after rank 1's last step (rank 0 printed step 4, then waited): the timeout, a beat, a look.
    last = max(e.t for e in of_type(evs, protocol.LOG) if e.rank == 0 and "step 4 loss" in str(e.get("line")))
    assert stuck.t - last < 5 + 10, stuck.t - last
    # The stack, dumped into rank 1's own log: where it hangs, in the script (sleep) or the DataLoader (worker).
    log = RunDir.at(done.get("run_dir")).stderr(1).read_text(encoding="utf-8")
    assert stuck.get("log") == str(RunDir.at(done.get("run_dir")).stderr(1))
    assert "most recent call first" in log, log[-3000:]
    where = "hang_in_step.py\", line" if mode == "sleep" else "torch/utils/data/dataloader.py\", line"
    assert where in log, log[-3000:]
    assert not processes_of(studio_home)


def test_a_rank_busy_in_torch_compile_for_longer_than_the_timeout_is_not_stuck(studio_home):
    """Helper trial of 2026-12-08: nanoGPT compiles its model for about a minute (its default), past the 45 s
    hang timeout, and DDP Studio said "rank 1 stuck in the forward pass at step 1" (with --on-hang stop it would
    have ended a healthy run). Rank 1 compiles for 9 s at step 3, past the timeout, while rank 0 waits. And a
    rank that has left its group is done: its slow exit (7 s here) is no hang either (seen in the same trial)."""
    res, evs = _hung_run("compile", "--on-hang", "stop", steps=3)
    assert res.returncode == 0, (final(evs).data, res.stderr[-2000:])
    assert of_type(evs, protocol.RANK_STUCK) == []
    assert final(evs).get("state") == protocol.FINISHED
    beats = [line for line in (RunDir.at(final(evs).get("run_dir")).events_dir / "rank1.beats").read_text(
        encoding="utf-8").splitlines() if '"compiling": true' in line.replace('":true', '": true')]
    assert len(beats) >= 5, "rank 1's beats did not say it was compiling"  # 9 s of beats every 0.5 s
    assert not processes_of(studio_home)


@pytest.mark.posix_only("sends SIGINT to the CLI as Ctrl+C; the Windows stop paths have their own tests")
def test_without_on_hang_stop_the_run_says_so_and_waits_until_stopped(studio_home):
    """The default (warn): the stuck rank is named once, and the run is left for the user to stop."""
    proc = subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--json", "--script",
                             str(SCRIPTS / "hang_in_step.py"), "--script-style", "env", *HANG, "--", "sleep", "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            **sigint_at(signal.SIG_DFL))
    parser, seen, ctrl_c = protocol.EventParser(), [], threading.Timer(8, proc.send_signal, (signal.SIGINT,))
    try:
        with killed_after(proc, what="the run"):
            for line in proc.stdout:
                seen += parser.feed(line)
                if ctrl_c.ident is None and of_type(seen, protocol.RANK_STUCK):
                    ctrl_c.start()  # the user's Ctrl+C, 8 s after the run said a rank is stuck
            proc.wait(60)
    finally:
        ctrl_c.cancel()
        kill_left((proc,))
    [stuck] = of_type(seen, protocol.RANK_STUCK)  # once, though it stayed stuck for 8 s more
    assert (stuck.rank, stuck.get("phase"), stuck.get("action")) == (1, "script", "warn")
    assert final(seen).get("state") == protocol.STOPPED
    assert not processes_of(studio_home)


def test_on_windows_the_stack_comes_through_the_dump_request_file(studio_home, tmp_path):
    """No SIGUSR1 on Windows: the launcher's request is a file; the rank's heartbeat thread answers it with
    faulthandler.dump_traceback (available on Windows), into the rank's stderr."""
    run = RunDir.at(tmp_path / "run")
    run.create()
    code = ("import time; from ddpstudio.rank.heartbeat import heartbeat; b = heartbeat(); "
            "b.mark('data', 7); time.sleep(60)")
    env = {**os.environ, "RANK": "1", protocol.EVENTS_DIR_ENV: str(run.events_dir), protocol.HEARTBEAT_ENV: "0.2"}
    with open(run.stderr(1), "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=err, stdin=subprocess.DEVNULL)
    try:
        watch = HangWatch(5)
        while not beat_file(run.events_dir, 1).exists() or not beat_file(run.events_dir, 1).read_text():
            assert proc.poll() is None, "the rank ended before its first beat"
            time.sleep(0.1)
        [beat] = events(beat_file(run.events_dir, 1).read_text().splitlines()[0])
        watch.feed(beat)
        assert (watch.beats[1].step, watch.beats[1].phase) == (7, "data")

        class Windows(RunHangs):
            platform = WINDOWS

        launcher = Windows()
        launcher.run = run
        assert watch.beats[1].by_signal  # this Linux rank registered SIGUSR1; a Windows launcher still uses the file
        launcher._ask_for_stack(type("R", (), {"rank": 1, "proc": proc})(), by_signal=True)
        assert dump_request(run.events_dir, 1).exists()
        deadline = time.monotonic() + 30
        while dump_request(run.events_dir, 1).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        log = run.stderr(1).read_text(encoding="utf-8")
    finally:
        proc.kill()
        proc.wait(30)
    assert not dump_request(run.events_dir, 1).exists()
    assert "the launcher asked for this rank's stack" in log
    assert 'line 1 in <module>' in log and "Current thread" in log, log


@pytest.mark.posix_only("SIGSTOP")
def test_a_frozen_recipe_rank_whose_beats_stop_is_named_from_its_last_beat(studio_home):
    """The built-in recipe beats too. Rank 1 frozen whole (SIGSTOP: no Python runs in it, its heartbeat thread
    neither, as in a driver hang) is named from its last beat, and --on-hang stop ends the run failed."""
    proc = subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--json", *TINY, *ENDLESS, "--workers", "0",
                             "--hang-timeout", "5", "--on-hang", "stop"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    parser, seen, frozen = protocol.EventParser(), [], None
    try:
        with killed_after(proc, what="the run"):
            for line in proc.stdout:
                seen += parser.feed(line)
                steps = of_type(seen, protocol.GLOBAL_STEP)
                if frozen is None and steps and steps[-1].get("step") >= 30:
                    [frozen] = [e.get("pid") for e in of_type(seen, protocol.RANK_STARTED) if e.rank == 1]
                    os.kill(frozen, signal.SIGSTOP)
            proc.wait(60)
    finally:
        kill_left((proc,))
    done = final(seen)
    assert proc.returncode == protocol.EXIT_CODES[protocol.FAILED] and done.get("state") == protocol.FAILED, done.data
    [stuck] = of_type(seen, protocol.RANK_STUCK)
    assert stuck.rank == 1 and stuck.get("waiting") == [0], stuck.data
    # Its last beat (up to one beat, 0.5 s here, older than the freeze) says where it was.
    assert stuck.get("phase") in PHASE_WORDS and stuck.get("step") >= 1, stuck.data
    assert done.get("summary") == f"rank 1 stuck {PHASE_WORDS[stuck.get('phase')]} at step {stuck.get('step')}"
    assert not processes_of(studio_home)
