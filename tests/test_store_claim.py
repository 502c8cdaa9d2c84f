"""A fixed store path belongs to one run at a time, and a relaunch on it just works after any kill.

Real CLIs, launchers and Gloo ranks on one fixed FileStore path; real SIGKILLs; the claim file is
checked as the OS sees it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ddpstudio.core.cleanup import registry
from tests.conftest import processes_of
from tests.studio import ddpstudio, events, final
from tests.test_clean_e2e import TRAIN, CliRun, _NoGpu, gone, run_processes, wait_for

pytestmark = pytest.mark.slow
# One rank: a claim is the launcher's, whatever the world size (each rank costs ~6 s of CPU to start).
QUICK = ["--world-size", "1", "--max-steps", "2", "--model", "mlp", "--batch-size", "8", "--image-size", "8",
         "--rendezvous-timeout", "30"]

# Claims a path for a run and then waits to be killed: a real holder, identified by pid + create time.
HOLDER = '''
import sys, time
from ddpstudio.core.rendezvous import claim
claim.acquire(sys.argv[1], sys.argv[2])
print("held", flush=True)
time.sleep(120)
'''


def _holder(store: str, run_id: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, store, run_id], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_claim_refuses_another_run_and_a_dead_one_is_taken_over(studio_home, tmp_path):
    from ddpstudio.core.rendezvous import claim

    store = str(tmp_path / "pg")
    holder = _holder(store, "run-a")
    try:
        with pytest.raises(claim.ClaimHeld) as refused:
            claim.acquire(store, "run-b")
        assert f"is in use by run run-a (pid {holder.pid}, since " in str(refused.value)
        assert claim.holder(store).run_id == "run-a"
        assert not claim.release(store, "run-b") and not claim.release(store, "run-a")  # not ours: untouched
    finally:
        holder.kill()
        holder.wait(10)
    assert claim.holder(store) is None, "a claim whose holder is dead is stale"
    stale = claim.acquire(store, "run-b")
    assert stale is not None and (stale.run_id, stale.pid) == ("run-a", holder.pid)
    assert json.loads(open(claim.claim_path(store)).read())["run_id"] == "run-b"
    assert claim.release(store, "run-b") and not os.path.exists(claim.claim_path(store))
    # A fixed path's folder is never created (issue 27: a mistyped shared folder must not become a new local
    # one; validation refuses it first, naming the missing part): the claim says so and leaves nothing.
    with pytest.raises(claim.ClaimError, match="No such file or directory"):
        claim.acquire(str(tmp_path / "not" / "yet" / "pg"), "run-c")
    assert not (tmp_path / "not").exists()


def test_a_cli_run_on_a_claimed_path_is_refused_with_the_holders_name_and_starts_nothing(studio_home, tmp_path):
    store = str(tmp_path / "pg")
    holder = _holder(store, "20260101-000000-abcdef")
    try:
        res = ddpstudio("run", *QUICK, "--store-path", store, timeout=120)
    finally:
        holder.kill()
        holder.wait(10)
    assert res.returncode == 2
    [line] = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert line.startswith("ddpstudio: error: the store path ") and "run 20260101-000000-abcdef" in line, line
    assert registry.load_records()[0] == [], "nothing was started"
    assert not os.path.exists(store)


def test_the_launcher_itself_refuses_a_claimed_path(studio_home, tmp_path):
    """The window starts the launcher directly: the claim holds there too (exit 2, one run_finished)."""
    from ddpstudio.core.plan import RecipeSpec
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import Request, build_plan, write_plan

    store = str(tmp_path / "pg")
    plan = build_plan(Request(store_path=store, recipe=RecipeSpec(max_steps=2)), current(), _NoGpu())
    holder = _holder(store, "run-a")
    try:
        res = subprocess.run([sys.executable, "-m", "ddpstudio.core.launch.launcher", str(write_plan(plan))],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        holder.kill()
        holder.wait(10)
    assert res.returncode == 2, res.stderr
    done = final(events(res.stdout))
    assert done.get("state") == "failed" and "is in use by run run-a" in done.get("summary")
    assert registry.load_records()[0] == []


def test_two_runs_started_together_on_one_path_exactly_one_runs(studio_home, tmp_path):
    store = str(tmp_path / "pg")
    cmd = [sys.executable, "-m", "ddpstudio", "run", *QUICK, "--store-path", store]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [o[1][-1500:] for o in outs]
    refused = outs[[p.returncode for p in procs].index(2)][1]
    [record] = registry.load_records()[0]
    assert record.state == "finished"
    assert f"is in use by run {record.run_id}" in refused
    assert not os.path.exists(store + ".claim"), "the claim is released when the run ends"


def test_a_claim_left_by_a_sigkilled_launcher_is_stale_and_taken_over(studio_home, tmp_path):
    store = str(tmp_path / "pg")
    first = CliRun(tmp_path, *TRAIN, "--store-path", store)
    first.wait_training()
    first.proc.kill()  # the CLI first, so nobody is left to release the claim
    first.proc.wait(10)
    first.sigkill()
    with open(store + ".claim") as fh:
        left = json.load(fh)
    assert (left["run_id"], left["pid"]) == (first.record.run_id, first.record.launcher_pid)

    res = ddpstudio("run", *QUICK, "--store-path", store, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"took over the store path's claim from run {first.record.run_id}" in res.stderr
    assert not os.path.exists(store + ".claim")
    assert run_processes(first.record.run_id) == []


SLOW_START = '''
import argparse, time
import torch.distributed as dist
p = argparse.ArgumentParser()
for name in ("--dist-url", "--dist-backend"):
    p.add_argument(name)
p.add_argument("--world-size", type=int); p.add_argument("--rank", type=int)
a = p.parse_args()
time.sleep(90)  # "loading the data": the store file does not exist yet
dist.init_process_group(a.dist_backend, init_method=a.dist_url, rank=a.rank, world_size=a.world_size)
'''


@pytest.mark.posix_only("kills the launcher with SIGKILL; Windows ends it with TerminateProcess")
def test_relaunch_after_only_the_launcher_died_stops_its_live_ranks_first(studio_home, tmp_path, monkeypatch):
    """Ranks whose launcher is gone (here: an older launcher without the lifeline, through its seam) are
    stopped by the pre-launch check even before they have created the store file, and it says so."""
    store = str(tmp_path / "pg")
    script = tmp_path / "slow_start.py"
    script.write_text(SLOW_START, encoding="utf-8")
    monkeypatch.setenv("DDPSTUDIO_NO_LIFELINE", "1")
    first = CliRun(tmp_path, "--store-path", store, "--script", str(script))
    os.kill(first.record.launcher_pid, signal.SIGKILL)
    first.proc.kill()  # and the CLI, before it notices and stops the ranks itself (as it would)
    first.proc.wait(30)
    orphans = [r.pid for r in first.record.ranks]
    assert not any(gone(pid) for pid in orphans), "without the lifeline the ranks outlive their launcher"
    monkeypatch.delenv("DDPSTUDIO_NO_LIFELINE")

    res = ddpstudio("run", *QUICK, "--store-path", store, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"stopped 2 process(es) still running on the store path {store}" in res.stderr, res.stderr
    assert f"of run {first.record.run_id}" in res.stderr
    assert "leftover store file" not in res.stderr, "the orphans had not created the store file yet"
    assert all(gone(pid) for pid in orphans)
    assert run_processes(first.record.run_id) == []
