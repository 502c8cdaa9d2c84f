"""Automatic restart after a crash (``--max-restarts``), for real: a rank killed with SIGKILL mid-run.

The recipe (the built-in perceptron, 2 micro-batches per step, a checkpoint
every 4 optimizer steps, over more than one epoch) is killed after its first
checkpoint; the launcher starts the group again from that checkpoint and the
run ends with every optimizer step trained once more than the lost ones, the
same steps and the same weights as a run nobody killed. A crash beyond the
limit ends the run failed with the usual root cause.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys

import pytest
import torch

from ddpstudio.core import protocol
from tests.conftest import killed_after, processes_of
from tests.studio import events, final, kill_left, of_type

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]
STEPS = 160  # 64 optimizer steps an epoch: the run crosses two epoch ends
RECIPE = ["--model", "mlp", "--image-size", "8", "--batch-size", "16", "--accumulate", "2", "--workers", "0",
          "--epochs", "4", "--rendezvous-timeout", "60"]


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--json", *RECIPE, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def _kill_rank_1_when(proc: subprocess.Popen, due, kills: int) -> list[protocol.Event]:
    """Read the run's events; each time ``due(event, events so far)`` says so, SIGKILL rank 1's latest process
    (``kills`` times at most). Returns every event."""
    parser, seen, done = protocol.EventParser(), [], 0
    with killed_after(proc, what="the run"):
        for line in proc.stdout:
            for ev in parser.feed(line):
                seen.append(ev)
                if done < kills and due(ev, seen):
                    [pid, *_] = [e.get("pid") for e in reversed(of_type(seen, protocol.RANK_STARTED)) if e.rank == 1]
                    os.kill(pid, signal.SIGKILL)
                    done += 1
        proc.wait(30)
    return seen


def test_a_rank_killed_mid_run_restarts_from_the_last_checkpoint_and_trains_every_step(studio_home, tmp_path):
    steady = _start("--max-steps", str(STEPS), "--checkpoint-dir", str(tmp_path / "steady"))
    crashing = _start("--max-steps", str(STEPS), "--checkpoint-dir", str(tmp_path / "crashing"), "--checkpoint-every",
                      "4", "--max-restarts", "2")
    try:
        evs = _kill_rank_1_when(crashing, lambda ev, _: ev.type == protocol.CHECKPOINT_SAVED, kills=1)
        steady_out, steady_err = steady.communicate(timeout=240)
    finally:
        kill_left((steady, crashing))
    assert steady.returncode == 0, steady_err[-3000:]
    done = final(evs)
    assert crashing.returncode == 0 and done.get("state") == protocol.FINISHED, done.to_dict()
    assert done.get("restarts") == 1
    [restarted] = of_type(evs, protocol.RUN_RESTARTED)
    resumed = restarted.get("from_step")
    assert (restarted.get("restart"), restarted.get("max_restarts")) == (1, 2)
    assert restarted.get("cause").startswith("rank 1 was killed by SIGKILL"), restarted.get("cause")
    assert restarted.get("how") == f"resuming from the last checkpoint (step {resumed})"
    assert resumed % 4 == 0 and 4 <= resumed < STEPS  # an accumulation boundary: a whole optimizer step
    # The curve continues: every step is there once the run is over, the redone ones start after the checkpoint.
    at = evs.index(restarted)
    steps = [e.get("step") for e in of_type(evs, protocol.GLOBAL_STEP)]
    after = [e.get("step") for e in of_type(evs[at:], protocol.GLOBAL_STEP)]
    assert sorted(set(steps)) == list(range(1, STEPS + 1))
    assert after == list(range(resumed + 1, STEPS + 1))
    assert len([e for e in of_type(evs[at:], protocol.RANK_STARTED)]) == 2
    # The same optimizer steps as the run nobody killed, and the same weights.
    crashed_state, steady_state = (torch.load(tmp_path / name / "checkpoint.pt", map_location="cpu", weights_only=True)
                                   for name in ("crashing", "steady"))
    assert crashed_state["global_step"] == steady_state["global_step"] == STEPS
    assert of_type(events(steady_out), protocol.GLOBAL_STEP)[-1].get("step") == STEPS
    for name, value in steady_state["model"].items():
        torch.testing.assert_close(crashed_state["model"][name], value, rtol=1e-5, atol=1e-6, msg=name)
    assert not processes_of(studio_home)


def test_a_crash_beyond_the_restarts_ends_the_run_failed_with_its_root_cause(studio_home):
    """No checkpoint folder: the one restart starts from step 0, as it says; the second crash ends the run."""
    def due(ev: protocol.Event, seen: list[protocol.Event]) -> bool:
        """The first step of each group: before any restart, then after the restart."""
        if ev.type != protocol.GLOBAL_STEP:
            return False
        restarts = [i for i, e in enumerate(seen) if e.type == protocol.RUN_RESTARTED]
        return len(of_type(seen[restarts[-1]:] if restarts else seen, protocol.GLOBAL_STEP)) == 1

    crashing = _start("--max-steps", "100000", "--max-restarts", "1")
    try:
        evs = _kill_rank_1_when(crashing, due, kills=2)
    finally:
        kill_left((crashing,))
    done = final(evs)
    assert crashing.returncode == 1 and done.get("state") == protocol.FAILED
    [restarted] = of_type(evs, protocol.RUN_RESTARTED)
    assert restarted.get("how") == "starting again from step 0 (no checkpoint folder)"
    assert restarted.get("from_step") == 0
    assert done.get("restarts") == 1
    cause = done.get("root_cause")
    assert cause["rank"] == 1 and cause["exit_code"] == -signal.SIGKILL
    assert done.get("summary").startswith("rank 1 was killed by SIGKILL (exit code -9)"), done.get("summary")
    assert not processes_of(studio_home)


def test_the_command_line_says_each_restart():
    from ddpstudio.cli.progress import ProgressView

    out = io.StringIO()
    view = ProgressView(out=out, tty=False)
    view.feed(protocol.make_event(protocol.RUN_RESTARTED, restart=1, max_restarts=3,
                                  cause="rank 1 was killed by SIGKILL (exit code -9) before it could report an error",
                                  from_step=8, how="resuming from the last checkpoint (step 8)"))
    view.feed(protocol.make_event(protocol.RUN_FINISHED, state="finished", duration_s=12.0, restarts=1))
    assert out.getvalue().splitlines() == [
        "restart 1 of 3 after a crash: rank 1 was killed by SIGKILL (exit code -9) before it could report an error; "
        "resuming from the last checkpoint (step 8)",
        "run finished after 12.0 s, 1 restart(s) after a crash"]
