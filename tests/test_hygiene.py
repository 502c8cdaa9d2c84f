"""scan / clean / prelaunch_check against real processes and real files (no torch: quick).

A "run" here is a registry record naming real processes: sleepers stand in
for ranks and launchers, so every safety rule is exercised for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ddpstudio.core.cleanup import hygiene, registry

from ddpstudio.core import paths
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.process.proctable import create_time
from ddpstudio.core.cleanup.registry import RankRecord

DEAD_PID = 2**22 + 7  # above Linux's largest pid_max: never a live process
SLEEP = "import time; time.sleep(300)"
WITH_WORKER = ("import subprocess, sys, time; "
               f"subprocess.Popen([sys.executable, '-c', {SLEEP!r}]); print('ready', flush=True); time.sleep(300)")
IGNORES_TERM = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('ready', flush=True); time.sleep(300)")


@pytest.fixture
def procs():
    """Start sleepers; whatever is still alive at the end is killed (group included)."""
    started: list[subprocess.Popen] = []

    def start(code: str = SLEEP, session: bool = True, wait_ready: bool = False) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE if wait_ready else None,
                                text=True, start_new_session=session)
        started.append(proc)
        if wait_ready:
            assert proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.kill()
        proc.wait()


def record(run_id: str, ranks=(), launcher: tuple[int, float | None] = (DEAD_PID, 1.0), store: str | None = None,
           fixed: bool = True, state: str = "running") -> registry.RunRecord:
    rec = registry.record_start(run_id, run_dir=str(paths.runs_dir() / run_id), launcher_pid=launcher[0],
                                launcher_create_time=launcher[1],
                                ranks=[RankRecord(i, p.pid, create_time(p.pid)) if hasattr(p, "pid")
                                       else RankRecord(i, *p) for i, p in enumerate(ranks)],
                                store_path=store, store_is_fixed=fixed)
    if state != "running":
        registry.record_end(run_id, state)
    return rec


def stale_file(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x09\x00\x00\x00refcount/")
    return str(path)


def alive(proc: subprocess.Popen) -> bool:
    return not gone(proc.pid)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # nobody may reap it here
    except psutil.NoSuchProcess:
        return True


def me() -> tuple[int, float]:
    """This test process, as the 'launcher' of a live run: alive for the whole test, never a target."""
    return os.getpid(), create_time(os.getpid())


def test_nothing_to_find_in_a_fresh_home():
    found = hygiene.scan()
    assert found.empty and found.to_dict()["empty"] is True
    assert hygiene.clean().summary() == "Nothing to clean up."


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_orphaned_rank_and_its_worker_are_stopped_then_the_store_deleted(procs, tmp_path):
    rank = procs(WITH_WORKER, wait_ready=True)
    [worker] = psutil.Process(rank.pid).children()
    store = stale_file(tmp_path / "pg")
    record("dead", ranks=[rank], store=store)

    found = hygiene.scan()
    assert {p.pid for p in found.orphans} == {rank.pid, worker.pid}
    assert all(p.ours and p.run_id == "dead" and p.rank == 0 and p.path == store for p in found.orphans)
    assert [(s.path, s.run_id) for s in found.stale_stores] == [(store, "dead")]
    assert "killed" in found.stale_stores[0].reason
    assert found.dead_runs == ["dead"]

    report = hygiene.clean(found)
    assert {p.pid for p in report.killed} == {rank.pid, worker.pid}
    assert report.deleted == [store] and report.left == []
    assert not alive(rank) and gone(worker.pid)
    assert not os.path.exists(store)
    assert report.marked == ["dead"]
    [rec], _ = registry.load_records()
    assert rec.state == "failed" and "killed" in rec.note
    assert hygiene.scan().empty
    assert "Stopped 2 processes" in report.summary() and store in report.summary()


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_workers_of_a_dead_rank_are_found_through_its_process_group(procs):
    rank = procs(WITH_WORKER, wait_ready=True)
    [worker] = psutil.Process(rank.pid).children()
    ct = create_time(rank.pid)
    rank.kill()
    rank.wait()  # the rank is gone; its worker lives on in the rank's process group
    record("dead", ranks=[(rank.pid, ct)])
    found = hygiene.scan(LINUX)
    assert [p.pid for p in found.orphans] == [worker.pid]
    report = hygiene.clean(found)
    assert [p.pid for p in report.killed] == [worker.pid]


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_windows_branch_stops_each_process_of_the_tree(procs):
    rank = procs(WITH_WORKER, wait_ready=True)
    [worker] = psutil.Process(rank.pid).children()
    record("dead", ranks=[rank])
    found = hygiene.scan(WINDOWS)  # no process groups there: the tree is found through parent pids
    assert {p.pid for p in found.orphans} == {rank.pid, worker.pid}
    report = hygiene.clean(found, platform=WINDOWS)
    assert {p.pid for p in report.killed} == {rank.pid, worker.pid}
    assert not alive(rank)


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_a_rank_that_ignores_the_polite_signal_is_killed_after_the_grace_period(procs):
    rank = procs(IGNORES_TERM, wait_ready=True)
    record("dead", ranks=[rank])
    t0 = time.monotonic()
    report = hygiene.clean(grace_s=0.5)
    assert [p.pid for p in report.killed] == [rank.pid]
    assert 0.5 <= time.monotonic() - t0 < 5
    assert rank.wait(5) == -signal.SIGKILL


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_a_recorded_pid_now_used_by_another_process_is_never_touched(procs, tmp_path):
    stranger = procs()
    ct = create_time(stranger.pid)
    store = stale_file(tmp_path / "pg")
    record("old", ranks=[(stranger.pid, ct - 1000.0)], launcher=(stranger.pid, ct - 1000.0), store=store)
    found = hygiene.scan()
    assert found.orphans == [] and found.dead_runs == ["old"]  # its launcher pid is reused too: not live
    report = hygiene.clean(found)
    assert report.killed == [] and report.deleted == [store]
    assert alive(stranger)


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_a_record_without_create_times_never_names_a_process_ours(procs):
    stranger = procs()
    record("old", ranks=[(stranger.pid, None)], state="failed")
    assert hygiene.scan().orphans == []


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_a_live_run_is_untouched(procs, tmp_path):
    live_rank = procs()
    live_store = stale_file(paths.store_dir() / "live.store")
    record("live", ranks=[live_rank], launcher=me(), store=live_store, fixed=False)
    dead_rank = procs()
    old_store = stale_file(tmp_path / "old")
    record("dead", ranks=[dead_rank], store=old_store)

    found = hygiene.scan()
    assert found.live_stores == {live_store: "live"}
    assert [p.pid for p in found.orphans] == [dead_rank.pid]
    assert [s.path for s in found.stale_stores] == [old_store]
    report = hygiene.clean(found)
    assert alive(live_rank) and os.path.exists(live_store)
    assert not alive(dead_rank) and not os.path.exists(old_store)
    assert report.deleted == [old_store]


def test_a_fixed_path_reused_by_a_live_run_is_not_stale(tmp_path):
    store = stale_file(tmp_path / "pg")
    record("old", store=store, state="failed")
    record("now", launcher=me(), store=store)
    assert hygiene.scan().stale_stores == []


def test_store_folder_files_without_a_record_are_stale_unless_a_live_launcher_says_otherwise(tmp_path):
    orphan_file = stale_file(paths.store_dir() / "gone.store")
    legacy = stale_file(paths.store_dir() / "legacy.store")
    run_dir = paths.runs_dir() / "legacy"
    run_dir.mkdir(parents=True)
    pid, ct = me()
    (run_dir / "processes.json").write_text(json.dumps({"launcher": {"pid": pid, "create_time": ct}}))
    found = hygiene.scan()
    assert [(s.path, s.run_id) for s in found.stale_stores] == [(orphan_file, None)]
    assert os.path.exists(legacy)


def test_corrupt_record_is_reported_skipped_and_set_aside(tmp_path):
    store = stale_file(tmp_path / "pg")
    record("ok", store=store, state="failed")
    bad = paths.registry_dir() / "broken.json"
    bad.write_text('{"run_id": "broken", "run_', encoding="utf-8")
    stale_file(paths.store_dir() / "broken.store")  # its run cannot be read: leave its store alone

    found = hygiene.scan()
    assert [Path(c.path).name for c in found.corrupt_records] == ["broken.json"]
    assert "half-written" in found.corrupt_records[0].reason
    assert [s.path for s in found.stale_stores] == [store]
    assert not found.empty

    report = hygiene.clean(found)
    assert report.deleted == [store]
    assert [Path(a).name for a, _ in report.moved] == ["broken.json"]
    assert not bad.exists() and (paths.registry_dir() / "corrupt" / "broken.json").exists()
    assert hygiene.scan().corrupt_records == []


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_foreign_holder_is_listed_not_ours_and_stopped_only_when_asked(procs, tmp_path):
    store = stale_file(tmp_path / "pg")
    record("dead", store=store)
    holder = procs(f"f = open({store!r}); print('ready', flush=True); import time; time.sleep(300)",
                   session=False, wait_ready=True)

    found = hygiene.scan()
    [info] = found.lock_holders
    assert (info.pid, info.ours, info.path, info.run_id) == (holder.pid, False, store, None)
    assert "sleep" in info.cmdline and info.name.startswith("python")
    assert found.foreign == [info]

    report = hygiene.clean(found)
    assert report.killed == [] and report.deleted == []
    assert alive(holder) and os.path.exists(store)
    assert {what for what, _ in report.left} == {info.describe(), store}
    assert any("--include-foreign" in why for _, why in report.left)

    report = hygiene.clean(hygiene.scan(), include_foreign=True)
    assert [p.pid for p in report.killed] == [holder.pid]
    assert report.deleted == [store] and report.left == []
    assert not alive(holder)


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_dry_run_changes_nothing(procs, tmp_path):
    rank = procs()
    store = stale_file(tmp_path / "pg")
    record("dead", ranks=[rank], store=store)
    report = hygiene.clean(dry_run=True)
    assert report.dry_run and [p.pid for p in report.killed] == [rank.pid] and report.deleted == [store]
    assert report.summary().startswith("Would stop 1 process")
    assert alive(rank) and os.path.exists(store)
    [rec], _ = registry.load_records()
    assert rec.state == "running"


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_clean_acts_only_on_what_was_shown(procs, tmp_path):
    shown = hygiene.scan()  # empty
    rank = procs()
    store = stale_file(tmp_path / "pg")
    record("dead", ranks=[rank], store=store)
    report = hygiene.clean(shown)
    assert report.nothing_done and alive(rank) and os.path.exists(store)


def test_a_stale_store_that_became_live_after_the_scan_is_left(tmp_path):
    store = stale_file(tmp_path / "pg")
    record("old", store=store, state="failed")
    shown = hygiene.scan()
    record("new", launcher=me(), store=store)
    report = hygiene.clean(shown)
    assert report.deleted == [] and os.path.exists(store)
    assert report.left == [(store, "no longer stale: a live run uses it now")]


# -- the pre-launch check ----------------------------------------------------
def test_prelaunch_passes_a_path_that_does_not_exist(tmp_path):
    result = hygiene.prelaunch_check(str(tmp_path / "new"))
    assert result.ok and result.cleaned == []


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_prelaunch_cleans_our_own_leftover_and_its_orphans(procs, tmp_path):
    store = stale_file(tmp_path / "pg")
    rank = procs(f"f = open({store!r}); print('ready', flush=True); import time; time.sleep(300)",
                 wait_ready=True)
    other_rank = procs()  # an orphan of a run on another path: not this check's business
    record("dead", ranks=[rank], store=store)
    record("elsewhere", ranks=[other_rank], store=str(tmp_path / "other"), state="failed")
    result = hygiene.prelaunch_check(store)
    assert result.ok, result.message
    assert result.cleaned == [store] and [p.pid for p in result.killed] == [rank.pid]
    assert "removed the leftover store file" in result.message and "dead" in result.message
    assert str(rank.pid) in result.message
    assert not os.path.exists(store) and not alive(rank) and alive(other_rank)


def test_prelaunch_blocks_a_file_that_is_not_ours(tmp_path):
    store = stale_file(tmp_path / "some file")
    result = hygiene.prelaunch_check(store)
    assert not result.ok and os.path.exists(store)
    assert "no DDP Studio run left it there" in result.message
    assert f"rm '{store}'" in result.message
    assert 'del "' in hygiene.prelaunch_check(store, WINDOWS).message


def test_prelaunch_blocks_a_store_a_live_run_uses(tmp_path):
    store = stale_file(tmp_path / "pg")
    record("busy", launcher=me(), store=store)
    result = hygiene.prelaunch_check(store)
    assert not result.ok and "run busy is using" in result.message and os.path.exists(store)


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_prelaunch_blocks_our_leftover_held_by_a_foreign_process(procs, tmp_path):
    store = stale_file(tmp_path / "pg")
    record("dead", store=store, state="failed")
    holder = procs(f"f = open({store!r}); print('ready', flush=True); import time; time.sleep(300)",
                   wait_ready=True)
    result = hygiene.prelaunch_check(store)
    assert not result.ok and alive(holder) and os.path.exists(store)
    assert f"pid {holder.pid}" in result.message and "--include-foreign" in result.message


def test_prelaunch_blocks_a_folder(tmp_path):
    result = hygiene.prelaunch_check(str(tmp_path))
    assert not result.ok and "is a folder" in result.message


def test_core_cleanup_modules_do_not_import_qt():
    code = ("import sys, ddpstudio.core.cleanup.hygiene, ddpstudio.cli.clean; "
            "sys.exit(any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_fixed_store_rewritten_long_after_our_run_ended_is_not_ours_any_more(tmp_path):
    store = stale_file(tmp_path / "pg")
    ended = registry.record_end(record("old", store=store).run_id, "finished").ended
    os.utime(store, (ended + 60, ended + 60))  # e.g. the user's own torchrun job on the same path
    assert hygiene.scan().stale_stores == []
    result = hygiene.prelaunch_check(store)
    assert not result.ok and os.path.exists(store)
    os.utime(store, (ended + 1, ended + 1))  # written as our run ended: our leftover
    assert [s.path for s in hygiene.scan().stale_stores] == [store]


# -- a script's own store (init_method="file://..." in its code): RunRecord.script_stores ----------------
def script_record(run_id: str, script: str, stores: list[str], ranks=(), launcher=(DEAD_PID, 1.0),
                  state: str = "running") -> registry.RunRecord:
    rec = registry.record_start(run_id, run_dir=str(paths.runs_dir() / run_id), launcher_pid=launcher[0],
                                launcher_create_time=launcher[1], script=script, script_stores=stores,
                                ranks=[RankRecord(i, p.pid, create_time(p.pid)) for i, p in enumerate(ranks)])
    if state != "running":
        registry.record_end(run_id, state)
    return rec


def test_a_scripts_own_store_is_a_store_of_its_run_live_then_stale(tmp_path):
    store = stale_file(tmp_path / "ddp_example")
    script_record("busy", str(tmp_path / "train.py"), [store], launcher=me())
    assert hygiene.scan().live_stores == {store: "busy"} and not hygiene.scan().stale_stores
    registry.record_end("busy", "stopped")
    [stale] = hygiene.scan().stale_stores
    assert (stale.path, stale.reason) == (store, "left by run busy, which stopped")
    assert registry.read_record(registry.record_path("busy")).stores == [store]  # round trip, no store of its own


@pytest.mark.posix_only("start_new_session, os.killpg and SIGKILL")
def test_prelaunch_of_a_script_cleans_the_stores_its_earlier_runs_left_and_only_those(procs, tmp_path):
    script, other = str(tmp_path / "train.py"), str(tmp_path / "eval.py")
    mine, theirs, gone_already = (stale_file(tmp_path / n) for n in ("ddp_example", "eval_store", "old"))
    os.unlink(gone_already)
    rank = procs()  # a rank of the killed run, still alive: stopped first
    other_rank = procs()
    script_record("killed", script, [mine, gone_already], ranks=[rank])
    script_record("other", other, [theirs], ranks=[other_rank], state="failed")
    result = hygiene.prelaunch_script_stores(script)
    assert result.ok and result.cleaned == [mine] and [p.pid for p in result.killed] == [rank.pid]
    assert result.message == (f"removed the leftover store file {mine}, which this script names (left by run "
                              f"killed, which was killed: its launcher is gone); first stopped its orphaned "
                              f"processes (pid {rank.pid})")
    assert not os.path.exists(mine) and os.path.exists(theirs) and not alive(rank) and alive(other_rank)
    assert hygiene.prelaunch_script_stores(script) == hygiene.PrelaunchResult(True)  # nothing left to do
    assert hygiene.prelaunch_script_stores(str(tmp_path / "never_ran.py")) == hygiene.PrelaunchResult(True)


def test_prelaunch_of_a_script_is_blocked_by_a_live_run_on_its_store_and_leaves_a_rewritten_one(tmp_path):
    script = str(tmp_path / "train.py")
    busy = stale_file(tmp_path / "ddp_example")
    script_record("live", str(tmp_path / "copy_of_train.py"), [busy], launcher=me())
    script_record("earlier", script, [busy], state="stopped")
    result = hygiene.prelaunch_script_stores(script)
    assert not result.ok and os.path.exists(busy)
    assert result.message == (f"run live is using the store file {busy}, which this script names, right now; two "
                              "runs cannot share one. Stop that run first.")
    registry.record_end("live", "finished")
    ended = registry.read_record(registry.record_path("live")).ended
    os.utime(busy, (ended + 60, ended + 60))  # written a minute after the runs: another program's file now
    assert hygiene.prelaunch_script_stores(script) == hygiene.PrelaunchResult(True) and os.path.exists(busy)
