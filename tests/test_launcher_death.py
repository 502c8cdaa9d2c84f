"""A launcher that dies takes its ranks with it, a crash in its loop still ends the stream, a bad plan gets
one clear error, and a rendezvous stall ends the run. Real launchers, real Gloo ranks, real SIGKILLs."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.cleanup import registry
from ddpstudio.core.plan import RecipeSpec
from ddpstudio.core.platform import current
from ddpstudio.core.policy import Request, build_plan, write_plan
from tests.conftest import killed_after, processes_of
from tests.studio import ddpstudio, events, final, of_type
from tests.test_clean_e2e import TRAIN, CliRun, _NoGpu, gone, run_processes, wait_for

pytestmark = pytest.mark.slow

# A parent (standing in for the launcher) that starts one child tied to it by one line only, prints the
# child's pid and waits; the child says "up" on the same stdout once its line is in place; the test then
# SIGKILLs the parent.
PARENT = '''
import os, subprocess, sys, time
from ddpstudio.core.process.parentdeath import Lifeline, death_signal_setter
env, options = dict(os.environ), {}
if sys.argv[1] == "lifeline":
    options = Lifeline().child_options(env)
    options.pop("preexec_fn", None)
    code = ("import time; from ddpstudio.rank.lifeline import watch_launcher; assert watch_launcher(); "
            "print('up', flush=True); time.sleep(120)")
else:
    options = {"preexec_fn": death_signal_setter()}
    code = "import time; print('up', flush=True); time.sleep(120)"
child = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True, **options)
print(child.pid, flush=True)
time.sleep(120)
'''


@pytest.mark.posix_only("the lifeline pipe and PR_SET_PDEATHSIG are POSIX's; Windows ranks die with the Job Object")
@pytest.mark.parametrize("line", ["lifeline", "death-signal"])
def test_each_line_alone_kills_the_child_when_its_parent_is_sigkilled(studio_home, line):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, line], stdout=subprocess.PIPE, text=True)
    try:
        with killed_after(parent, 60, "the parent, before its child was up"):
            child = int(parent.stdout.readline())
            assert parent.stdout.readline().strip() == "up"  # the child's interpreter runs, its line in place
        assert not gone(child), "the child runs while its parent lives"
        parent.kill()
        parent.wait(10)
        wait_for(lambda: gone(child), 5, f"the child to die with its parent ({line})")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


@pytest.mark.posix_only("kills the launcher with SIGKILL; Windows ends it with TerminateProcess")
def test_sigkill_of_the_launcher_mid_run_takes_every_rank_and_the_cli_says_so(studio_home, tmp_path):
    run_ = CliRun(tmp_path, *TRAIN)
    run_.wait_training()
    ranks = [r.pid for r in run_.record.ranks]
    t0 = time.monotonic()
    os.kill(run_.record.launcher_pid, signal.SIGKILL)
    wait_for(lambda: all(gone(p) for p in ranks), 5, "every rank to die with its launcher")
    took = time.monotonic() - t0
    assert run_.proc.wait(30) == 1
    said = run_.log.read_text()
    assert "the launcher ended without reporting a result (killed by SIGKILL)" in said, said[-2000:]
    assert "2 of its 2 rank(s) ended with it" in said
    assert run_processes(run_.record.run_id) == []
    [record] = [r for r in registry.load_records()[0] if r.run_id == run_.record.run_id]
    assert record.state == "failed" and "killed by SIGKILL" in (record.note or "")
    print(f"ranks gone {took:.2f} s after the launcher's SIGKILL")


@pytest.mark.posix_only("kills the launcher with SIGKILL; Windows ends it with TerminateProcess")
def test_sigkill_of_the_launcher_takes_a_user_scripts_ranks_too(studio_home, tmp_path):
    """A user's script runs no code of ours in its loop: its ranks die with the launcher all the same (the
    parent-death signal), and the children they started, which that signal does not reach, are ended by the
    CLI that notices the launcher is gone."""
    from tests.studio import SCRIPTS

    run_ = CliRun(tmp_path, "--script", str(SCRIPTS / "stubborn_child.py"), "--script-style", "env",
                  "--rendezvous-timeout", "20", "--", "train")
    run_.wait_training()
    ranks = [r.pid for r in run_.record.ranks]
    children = wait_for(lambda: _stubborn_children(run_), 60, "each rank's child to start")
    os.kill(run_.record.launcher_pid, signal.SIGKILL)
    wait_for(lambda: all(gone(p) for p in ranks), 5, "every rank to die with the launcher")
    assert run_.proc.wait(30) == 1  # the CLI ends what the ranks left (the children ignore SIGTERM)
    assert all(gone(p) for p in children), "the ranks' children outlived the run"
    said = run_.log.read_text()
    assert "the launcher ended without reporting a result (killed by SIGKILL)" in said, said[-2000:]
    # The rank's lifeline (killing its group) or the CLI (ending what dead ranks left): whichever came first.
    assert "2 of its 2 rank(s) ended with it" in said, said[-2000:]
    assert run_processes(run_.record.run_id) == []


ORPHANING_RANK = """
import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "print('up', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "up"
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.posix_only("on Windows the Job Object takes a rank's children with it")
def test_the_cli_ends_what_a_dead_rank_left_running_and_nothing_else(studio_home):
    """aftermath._end_orphans: a rank killed alone (as by the parent-death signal) leaves a child that
    ignores SIGTERM; it is found through its dead parent and ended; a process that is not the recorded
    one is not touched."""
    from ddpstudio.core.launch.aftermath import _end_orphans
    from ddpstudio.core.process.proctable import create_time

    rank = subprocess.Popen([sys.executable, "-c", ORPHANING_RANK], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)  # a rank leads its own process group
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    child = None
    try:
        child = int(rank.stdout.readline())
        created = create_time(rank.pid)
        rank.kill()
        rank.wait(10)
        assert not gone(child)
        assert _end_orphans([(rank.pid, created), (stranger.pid, 0.0)], current()) == [child]
        wait_for(lambda: gone(child), 10, "the orphan to be ended")
        assert stranger.poll() is None, "a process that is not the recorded one is left alone"
    finally:
        for proc in (rank, stranger):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        if child is not None and not gone(child):
            os.kill(child, signal.SIGKILL)

def _stubborn_children(run_: CliRun) -> list[int] | None:
    """The pids stubborn_child.py's ranks print ("rank N child pid P"), once both have."""
    import re

    pids = [int(p) for p in re.findall(r"child pid (\d+)", run_.log.read_text())]
    return pids if len(pids) == 2 else None


@pytest.mark.posix_only("kills the launcher with SIGKILL; Windows ends it with TerminateProcess")
def test_sigkill_of_the_launcher_while_ranks_still_start_takes_them_too(studio_home, tmp_path):
    run_ = CliRun(tmp_path, *TRAIN)  # returns as soon as both ranks are recorded: they are still importing
    os.kill(run_.record.launcher_pid, signal.SIGKILL)
    wait_for(lambda: all(gone(r.pid) for r in run_.record.ranks), 5, "the starting ranks to die")
    assert run_.proc.wait(30) == 1
    assert run_processes(run_.record.run_id) == []


def test_a_crash_inside_the_launcher_loop_stops_the_ranks_and_ends_the_stream_once(studio_home, monkeypatch):
    from ddpstudio.core.launch.launcher import Launcher, run

    plan = build_plan(Request(recipe=RecipeSpec(model="mlp", image_size=8, batch_size=8, max_steps=100000)), current(), _NoGpu())
    write_plan(plan)
    out = io.StringIO()
    launcher = Launcher(plan, out=out)
    reap, crashed = Launcher._reap, []

    def reap_then_fail(self):
        reap(self)
        if not crashed and any(r.reports_steps for r in self.ranks):
            crashed.append(time.monotonic())
            raise RuntimeError("a bug in the loop")

    monkeypatch.setattr(Launcher, "_reap", reap_then_fail)
    code = run(launcher)
    assert crashed, "the loop ran until training"
    assert code == protocol.EXIT_CODES["failed"]
    evs = events(out.getvalue())
    done = final(evs)  # exactly one
    assert done.get("state") == "failed"
    assert "the launcher itself failed (RuntimeError: a bug in the loop)" in done.get("summary")
    assert all(r.proc.poll() is not None for r in launcher.ranks)
    assert run_processes(plan.run_id) == []
    assert registry.load_records()[0][0].state == "failed"


def _plan_file(tmp_path, kind: str) -> str:
    path = tmp_path / "plan.json"
    if kind == "missing":
        return str(tmp_path / "no-such-plan.json")
    plan = build_plan(Request(recipe=RecipeSpec(max_steps=2)), current(), _NoGpu()).to_dict()
    text = {"empty": "", "garbage": "\x00not json{", "a list": "[1, 2]",
            "wrong type": json.dumps({**plan, "world_size": "two"}),
            "no workload": json.dumps({**plan, "recipe": None, "script": None})}[kind]
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("kind, says", [
    ("missing", "does not exist"), ("empty", "is empty"), ("garbage", "is not valid JSON"),
    ("a list", "is a JSON list, not an object"), ("wrong type", "'world_size' is 'two', which is not a whole number"),
    ("no workload", "names neither a recipe nor a script"),
])
def test_a_bad_plan_gives_one_error_and_one_run_finished(studio_home, tmp_path, kind, says):
    res = subprocess.run([sys.executable, "-m", "ddpstudio.core.launch.launcher", _plan_file(tmp_path, kind)],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    [line] = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert line.startswith("ddpstudio: error: ") and says in line, line
    done = final(events(res.stdout))
    assert done.get("state") == "failed" and says in done.get("summary")
    assert not processes_of(studio_home)


# Rank 1 is seen from inside, then never reaches the rendezvous; torch is imported after that point, so the
# rank that never gets there does not pay for a torch start the test has no use for.
STALLING_SCRIPT = '''
import argparse, time
from datetime import timedelta
from ddpstudio import report
p = argparse.ArgumentParser()
for name in ("--dist-url", "--dist-backend"):
    p.add_argument(name)
p.add_argument("--world-size", type=int); p.add_argument("--rank", type=int)
a = p.parse_args()
report.log("loading the data")
if a.rank == 1:
    time.sleep(600)  # never reaches the rendezvous
import torch.distributed as dist
dist.init_process_group(a.dist_backend, init_method=a.dist_url, rank=a.rank, world_size=a.world_size,
                        timeout=timedelta(seconds=600))
report.joined()
'''


def test_a_stall_the_watchdog_reports_ends_the_run_as_failed_with_its_findings(studio_home, tmp_path):
    script = tmp_path / "stall.py"
    script.write_text(STALLING_SCRIPT, encoding="utf-8")
    t0 = time.monotonic()
    res = ddpstudio("run", "--json", "--rendezvous-timeout", "3", "--script", str(script), timeout=120)
    took = time.monotonic() - t0
    assert res.returncode == 1, res.stderr[-2000:]
    done = final(events(res.stdout))
    assert done.get("state") == "failed"
    cause = done.get("root_cause")
    assert cause["message"].startswith("rendezvous stalled: rank(s) 0, 1 had not joined after 3 s"), cause
    assert done.get("summary").startswith("rank 0 failed first (no exit code): rendezvous stalled")
    assert of_type(events(res.stdout), protocol.ERROR)
    assert took < 60, f"the stalled run took {took:.0f} s to end"
    assert not processes_of(studio_home)


LATE_IMPORT_SCRIPT = '''
import os, time
from ddpstudio import report
if os.environ["RANK"] == "0":
    report.log("loading the data")  # seen from inside at once
else:
    time.sleep(10)  # still starting (a loaded machine importing torch) past the watchdog's 3 + 5 s, and silent
import torch.distributed as dist
dist.init_process_group("gloo")
report.joined()
dist.barrier()
print("loss: 0.5", flush=True)
dist.destroy_process_group()
'''


def test_a_rank_still_starting_past_the_timeout_is_not_a_stall(studio_home, tmp_path):
    """The rendezvous timeout counts from when every rank was seen from inside: a rank that has not yet
    reached its imports is starting, not stalled (the watchdog used to end this run at 3 + 5 s)."""
    script = tmp_path / "late.py"
    script.write_text(LATE_IMPORT_SCRIPT, encoding="utf-8")
    res = ddpstudio("run", "--json", "--rendezvous-timeout", "3", "--script", str(script), "--script-style", "env",
                    timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    evs = events(res.stdout)
    assert final(evs).get("state") == "finished"
    assert {e.rank for e in of_type(evs, protocol.RANK_JOINED)} == {0, 1}
    assert not any("rendezvous stalled" in str(e.get("message")) for e in of_type(evs, protocol.ERROR))


@pytest.mark.posix_only("kills the launcher with SIGKILL; Windows ends it with TerminateProcess")
def test_ranks_that_outlive_their_launcher_are_stopped_by_the_cli_which_says_so(studio_home, tmp_path, monkeypatch):
    """The CLI's own check of the recorded ranks, for when both lines fail (here: through their seam)."""
    monkeypatch.setenv("DDPSTUDIO_NO_LIFELINE", "1")
    run_ = CliRun(tmp_path, *TRAIN)
    run_.wait_training()
    os.kill(run_.record.launcher_pid, signal.SIGKILL)
    assert run_.proc.wait(60) == 1
    said = run_.log.read_text()
    ranks = sorted(r.pid for r in run_.record.ranks)
    assert "0 of its 2 rank(s) ended with it; stopped the rest (pid " in said, said[-2000:]
    assert all(str(pid) in said.split("stopped the rest")[1] for pid in ranks)
    assert all(gone(pid) for pid in ranks)
    assert run_processes(run_.record.run_id) == []
