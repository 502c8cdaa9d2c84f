"""Stale FileStore files and orphaned ranks: find them (``scan``), remove them (``clean``), guard a launch.

A killed run leaves its FileStore file behind, and the next run on that file
hangs or fails (pytorch #13865, #55967); on Windows a surviving rank also
keeps the file locked. The registry says which runs and processes are ours;
a run is live while its recorded launcher (pid + create time) is. Rules:
nothing of a live run is touched; a process we did not start is stopped only
when asked for by name (``include_foreign``); a file is deleted only if it is
in our store folder or was the store of one of our runs, and no live run
uses it. Qt-free: the CLI and the window's clean-up button call these.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ddpstudio.core.process import killer, lockholders

from ddpstudio.core import cmdline, paths

from ddpstudio.core.cleanup import registry
from ddpstudio.core.cleanup.findings import CleanReport, Findings, PrelaunchResult, ProcessInfo, StaleStore
from ddpstudio.core.process.lockholders import norm
from ddpstudio.core.platform import Platform, current
from ddpstudio.core.process.proctable import Proc, ProcTable, same_time
from ddpstudio.core.rendezvous.asciipath import store_folders
from ddpstudio.core.cleanup.registry import CorruptRecord, RunRecord

__all__ = ["CleanReport", "CorruptRecord", "Findings", "PrelaunchResult", "ProcessInfo", "StaleStore",
           "clean", "prelaunch_check", "prelaunch_script_stores", "scan"]

# A store written this long after its run's last sign of life was written by someone else.
REWRITE_SLACK_S = 10.0
KILLED_NOTE = "the launcher was killed before it could record the end; marked by ddpstudio clean"


# -- scan --------------------------------------------------------------------
def scan(platform: Platform | None = None) -> Findings:
    """Look, touch nothing: stale store files, orphaned ranks, who holds the stale files, bad records."""
    platform = platform or current()
    posix = not platform.is_windows
    records, corrupt = registry.load_records()
    table = ProcTable.take()
    live = [r for r in records if _is_live(r, table)]
    over = [r for r in records if r not in live]
    found = Findings(corrupt_records=corrupt,
                     dead_runs=[r.run_id for r in over if r.state == registry.RUNNING])
    live_pids: dict[int, str] = {}
    for r in live:
        for path in r.stores:
            found.live_stores[path] = r.run_id
        live_pids[r.launcher_pid] = r.run_id
        for rank in r.ranks:
            for proc in _tree(table, rank.pid, rank.create_time, posix):
                live_pids[proc.pid] = r.run_id
    found.orphans = _orphans(over, table, posix, live_pids)
    found.stale_stores = _stale_stores(over, {norm(p) for p in found.live_stores}, corrupt, table, platform)
    found.lock_holders = _lock_holders(found, over, table, live_pids, platform)
    return found


def _is_live(record: RunRecord, table: ProcTable) -> bool:
    if record.ended_state:
        return False
    if record.launcher_create_time is None:
        # Cannot tell its launcher from a stranger with the same pid: assume live, touch nothing.
        proc = table.get(record.launcher_pid)
        return proc is not None and not proc.zombie
    return table.alive(record.launcher_pid, record.launcher_create_time) is not None


def _tree(table: ProcTable, pid: int, created: float | None, posix: bool) -> list[Proc]:
    """The recorded process (if still it) and everything it started that is still alive."""
    root = table.alive(pid, created)
    return ([root] if root else []) + table.descendants(pid, created, posix)


def _orphans(over: list[RunRecord], table: ProcTable, posix: bool, live_pids: dict[int, str]) -> list[ProcessInfo]:
    orphans: dict[int, ProcessInfo] = {}
    for r in over:
        for rank in r.ranks:
            for proc in _tree(table, rank.pid, rank.create_time, posix):
                if proc.pid not in orphans and proc.pid not in live_pids:
                    orphans[proc.pid] = _info(proc, r.run_id, rank.rank, True, r.store_path)
    return list(orphans.values())


def _reason(record: RunRecord) -> str:
    if record.state == registry.RUNNING:
        return f"left by run {record.run_id}, which was killed: its launcher is gone"
    return f"left by run {record.run_id}, which {record.state}"


def _stale_stores(over: list[RunRecord], live: set[str], corrupt: list[CorruptRecord],
                  table: ProcTable, platform: Platform) -> list[StaleStore]:
    stale: dict[str, StaleStore] = {}
    folders = store_folders(str(paths.store_dir()), platform)
    ours = {norm(f) for f in folders}
    rewritten: set[str] = set()
    for r in reversed(over):  # newest first: the reason names the last run that used the file
        for path in r.stores:
            if not os.path.isfile(path):
                continue
            key = norm(path)
            if key in live or key in stale or key in rewritten:
                continue
            if os.path.dirname(key) not in ours and _written_since(path, r):
                rewritten.add(key)  # another program uses that path now: not our leftover any more
                continue
            stale[key] = StaleStore(path, _reason(r), r.run_id)
    unreadable = {c.run_id for c in corrupt}
    files = []
    for folder in folders:
        try:
            files += sorted(p for p in Path(folder).iterdir() if p.is_file())
        except FileNotFoundError:
            pass
    for f in files:
        key = norm(str(f))
        run_id = f.name.removesuffix(".store")
        if key in live or key in stale or run_id in unreadable or _unrecorded_live(run_id, table):
            continue  # in use, already listed, or its record is unreadable: cannot tell, so leave it
        stale[key] = StaleStore(str(f), "in DDP Studio's store folder and used by no live run", None)
    return list(stale.values())


def _written_since(path: str, record: RunRecord) -> bool:
    """Was the file written well after the run's last sign of life (its end, or its newest log or event)?

    A user may point torchrun at the same fixed path (the blog's ``D:\\pg``)
    after our run; such a file must not be taken for our leftover. FileStore
    ranks open the file only briefly, so no lock shows that it is in use.
    """
    try:
        written = os.stat(path).st_mtime
    except OSError:
        return False
    last = record.ended or record.started
    if written <= last + REWRITE_SLACK_S:
        return False
    run = Path(record.run_dir)
    for folder, pattern in ((run, "*.json*"), (run / "events", "*.jsonl"), (run / "logs", "*.log")):
        for p in folder.glob(pattern):
            try:
                last = max(last, p.stat().st_mtime)
            except OSError:
                continue
    return written > last + REWRITE_SLACK_S


def _unrecorded_live(run_id: str, table: ProcTable) -> bool:
    """A run with no registry record (older version, record lost) is live if its processes.json says so."""
    try:
        raw = json.loads((paths.runs_dir() / run_id / "processes.json").read_text(encoding="utf-8"))
        launcher = raw["launcher"]
        return table.alive(int(launcher["pid"]), launcher.get("create_time")) is not None
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _lock_holders(found: Findings, over: list[RunRecord], table: ProcTable,
                  live_pids: dict[int, str], platform: Platform) -> list[ProcessInfo]:
    orphans = {o.pid: o for o in found.orphans}
    launchers = {r.launcher_pid: r for r in over}
    holders = []
    for pid, path in lockholders.holders([s.path for s in found.stale_stores], platform):
        proc = table.get(pid) or Proc(pid, None, None, "?", "", False)
        if pid in orphans:
            o = orphans[pid]
            holders.append(_info(proc, o.run_id, o.rank, True, path))
        elif pid in live_pids:
            holders.append(_info(proc, live_pids[pid], None, True, path))
        elif pid in launchers and same_time(proc.create_time, launchers[pid].launcher_create_time):
            holders.append(_info(proc, launchers[pid].run_id, None, True, path))
        else:
            holders.append(_info(proc, None, None, False, path))
    return holders


def _info(proc: Proc, run_id: str | None, rank: int | None, ours: bool, path: str | None) -> ProcessInfo:
    return ProcessInfo(proc.pid, proc.name, proc.cmdline, run_id, rank, ours, path, proc.create_time)


# -- clean -------------------------------------------------------------------
def clean(findings: Findings | None = None, include_foreign: bool = False, dry_run: bool = False, *,
          platform: Platform | None = None, grace_s: float = killer.GRACE_S) -> CleanReport:
    """Stop orphaned ranks (whole tree, polite then forced), then delete stale store files; say what was done.

    ``findings`` is what the user was shown; only those items are acted on,
    each re-checked against a fresh scan first (a pid may have been reused, a
    store may be live again). ``include_foreign`` also stops the listed lock
    holders that are not ours.
    """
    platform = platform or current()
    shown = findings if findings is not None else scan(platform)
    now = shown if findings is None or dry_run else scan(platform)
    report = CleanReport(dry_run=dry_run)
    orphans = [p for p in now.orphans if _listed(p, shown.orphans)]
    foreign = [p for p in now.foreign if _listed(p, shown.foreign)]
    stopped = _stop(report, orphans, platform, grace_s, group=True, dry_run=dry_run)
    if include_foreign:
        stopped |= _stop(report, foreign, platform, grace_s, group=False, dry_run=dry_run)
    else:
        for p in foreign:
            report.left.append((p.describe(), f"not started by DDP Studio (has {p.path} open; command: "
                                              f"{_short(p.cmdline)}); stopped only with --include-foreign"))
    now_stale = {norm(s.path) for s in now.stale_stores}
    shown_stale = {norm(s.path) for s in shown.stale_stores}
    now_live = {norm(p) for p in now.live_stores}
    for s in shown.stale_stores:
        if norm(s.path) not in now_stale and os.path.lexists(s.path):
            report.left.append((s.path, "no longer stale: a live run uses it now" if norm(s.path) in now_live
                                else "no longer a leftover of ours: another program has written it since"))
    for s in now.stale_stores:
        if norm(s.path) in shown_stale:
            _delete(report, s, now, stopped, dry_run, platform)
    shown_dead = set(shown.dead_runs)
    for run_id in now.dead_runs:
        if run_id in shown_dead and not any(p.run_id == run_id and p.pid not in stopped for p in now.orphans):
            if dry_run or registry.record_end(run_id, "failed", KILLED_NOTE):
                report.marked.append(run_id)
    shown_corrupt = {c.path for c in shown.corrupt_records}
    for c in now.corrupt_records:
        if c.path in shown_corrupt:
            _set_aside(report, c, dry_run)
    return report


def _listed(proc: ProcessInfo, shown: list[ProcessInfo]) -> bool:
    return any(p.pid == proc.pid and same_time(p.create_time, proc.create_time) for p in shown)


def _stop(report: CleanReport, procs: list[ProcessInfo], platform: Platform, grace_s: float, group: bool,
          dry_run: bool) -> set[int]:
    if dry_run:
        report.killed += procs
        return {p.pid for p in procs}
    targets = [killer.Target(p.pid, p.create_time, group) for p in procs]
    result = killer.stop(targets, platform, grace_s=grace_s)
    by_pid = {p.pid: p for p in procs}
    report.killed += [by_pid[pid] for pid in result.stopped]
    report.forced += list(result.forced)
    report.left += [(by_pid[pid].describe(), why) for pid, why in result.left]
    return set(result.stopped)


def _delete(report: CleanReport, store: StaleStore, now: Findings, stopped: set[int], dry_run: bool,
            platform: Platform) -> None:
    key = norm(store.path)
    blockers = [h for h in now.lock_holders if norm(h.path or "") == key and h.pid not in stopped]
    if blockers:
        report.left.append((store.path, "still held open by " + ", ".join(
            h.describe() + ("" if h.ours else " (not ours)") for h in blockers)))
        return
    if dry_run:
        report.deleted.append(store.path)
        return
    try:
        os.unlink(store.path)
    except FileNotFoundError:
        return
    except OSError as exc:
        # Windows: still open in a process the scan did not see (it opened the file after the scan).
        who = [pid for pid, _ in lockholders.holders([store.path], platform)]
        held = f"; it is open in pid {', '.join(map(str, who))}" if who else ""
        report.left.append((store.path, f"could not delete it: {exc.strerror or exc}{held}"))
        return
    report.deleted.append(store.path)


def _set_aside(report: CleanReport, record: CorruptRecord, dry_run: bool) -> None:
    """Move a corrupt record out of the registry (kept for inspection) so it is reported once."""
    target = paths.registry_dir() / "corrupt" / Path(record.path).name
    if not dry_run:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(record.path, target)
        except OSError as exc:
            report.left.append((record.path, f"corrupt record ({record.reason}); could not move it: {exc}"))
            return
    report.moved.append((record.path, str(target)))


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- before a launch ---------------------------------------------------------
def prelaunch_check(store_path: str, platform: Platform | None = None, *, _stopped: bool = False) -> PrelaunchResult:
    """May a run use this fixed FileStore path? Cleans our own leftover there; blocks on anything else."""
    platform = platform or current()
    if os.path.isdir(store_path):
        return PrelaunchResult(False, [], f"the store path {store_path} is a folder; a FileStore needs a file. "
                                          f"Choose a file path, such as {os.path.join(store_path, 'pg')}.")
    # Always look, file or no file: ranks of a killed launcher may not have reached the store yet,
    # and would join the new run's process group when they do.
    found = scan(platform)
    key = norm(store_path)
    users = [run_id for path, run_id in found.live_stores.items() if norm(path) == key]
    if users:
        return PrelaunchResult(False, [], f"run {users[0]} is using the store file {store_path} right now; two "
                                          "runs cannot share one. Stop that run first, or choose another store path.")
    orphans = [o for o in found.orphans if norm(o.path or "") == key]
    if orphans and not _stopped:
        stopped = clean(Findings(orphans=orphans), platform=platform)
        if stopped.left:
            why = "; ".join(f"{what}: {reason}" for what, reason in stopped.left)
            return PrelaunchResult(False, [], f"ranks of an earlier run on the store path {store_path} are still "
                                              f"running and could not be stopped ({why}).", stopped.killed)
        note = (f"stopped {len(stopped.killed)} process(es) still running on the store path {store_path}: "
                + ", ".join(p.describe() for p in stopped.killed))
        result = prelaunch_check(store_path, platform, _stopped=True)
        result.message = note + ("; " + result.message if result.cleaned or not result.ok else "")
        result.killed = stopped.killed + result.killed
        return result
    if not os.path.lexists(store_path):
        return PrelaunchResult(True, [], f"the store file {store_path} does not exist yet: good")
    stale = [s for s in found.stale_stores if norm(s.path) == key]
    if not stale:
        return PrelaunchResult(False, [], _not_ours_message(store_path, platform))
    return _remove_leftover(store_path, stale, [o for o in found.orphans if norm(o.path or "") == key], found,
                            platform)


def _remove_leftover(path: str, stale: list[StaleStore], orphans: list[ProcessInfo], found: Findings,
                     platform: Platform, named: str = "") -> PrelaunchResult:
    """Our leftover store at ``path`` removed before a launch, its ``orphans`` stopped first; refused, with
    why, while a program we did not start holds it or when it cannot be removed. ``named``: how the path
    came to be used (", which this script names,")."""
    key = norm(path)
    foreign = [p for p in found.foreign if norm(p.path or "") == key]
    if foreign:
        who = ", ".join(f"{p.describe()}: {_short(p.cmdline, 80)}" for p in foreign)
        return PrelaunchResult(False, [], f"the store file {path}{named} was {stale[0].reason}, but a program DDP "
                                          f"Studio did not start has it open ({who}). Close that program, or run "
                                          "'ddpstudio clean --include-foreign' to stop it.")
    mine = Findings(stale_stores=stale, orphans=orphans,
                    lock_holders=[h for h in found.lock_holders if norm(h.path or "") == key])
    report = clean(mine, platform=platform)
    if os.path.lexists(path):
        why = "; ".join(f"{what}: {reason}" for what, reason in report.left) or "it came back"
        return PrelaunchResult(False, report.deleted, f"the store file {path}{named} is a leftover of an earlier "
                                                      f"run but could not be removed ({why}). Run 'ddpstudio "
                                                      "clean' to see what holds it.", report.killed)
    message = f"removed the leftover store file {path}{named.rstrip(',')} ({stale[0].reason})"
    if report.killed:
        message += "; first stopped its orphaned processes (pid " + ", ".join(str(p.pid) for p in report.killed) + ")"
    return PrelaunchResult(True, report.deleted, message, report.killed)


def prelaunch_script_stores(script: str, platform: Platform | None = None) -> PrelaunchResult:
    """Before a script runs again: the FileStore files its own code made in earlier runs of ours
    (``RunRecord.script_stores``), cleaned where a killed run left them, with the ranks it left.

    Such a path is the script's, not ours: one that another program has written since is left alone (the
    script meets there as it always does), and only a live run of ours on it blocks the launch."""
    platform = platform or current()
    records, _ = registry.load_records()
    key = norm(os.path.abspath(script))
    used: dict[str, list[str]] = {}  # store path (normalised) -> runs of this script that used it
    paths: dict[str, str] = {}
    for r in records:
        if r.script and norm(os.path.abspath(r.script)) == key:
            for path in r.script_stores:
                used.setdefault(norm(path), []).append(r.run_id)
                paths.setdefault(norm(path), path)
    if not any(os.path.lexists(p) for p in paths.values()):
        return PrelaunchResult(True)
    found = scan(platform)
    live = {norm(p): run_id for p, run_id in found.live_stores.items()}
    result = PrelaunchResult(True)
    said = []
    for k, path in paths.items():
        if k in live:
            return PrelaunchResult(False, result.cleaned, f"run {live[k]} is using the store file {path}, which "
                                   "this script names, right now; two runs cannot share one. Stop that "
                                   "run first.", result.killed)
        stale = [st for st in found.stale_stores if norm(st.path) == k]
        if not stale:
            continue  # gone, or another program's file now
        removed = _remove_leftover(path, stale, [o for o in found.orphans if o.run_id in used[k]], found, platform,
                                   ", which this script names,")
        result.cleaned += removed.cleaned
        result.killed += removed.killed
        if not removed.ok:
            return PrelaunchResult(False, result.cleaned, removed.message, result.killed)
        said.append(removed.message)
    result.message = "; ".join(said)
    return result


def _not_ours_message(store_path: str, platform: Platform) -> str:
    holders = [pid for pid, _ in lockholders.holders([store_path], platform)]
    delete = cmdline.shell_line(["del" if platform.is_windows else "rm", store_path], platform)
    text = (f"the store file {store_path} already exists, and no DDP Studio run left it there. A FileStore needs a "
            "new, empty file; an old one makes the ranks hang or fail (pytorch #55967).")
    if holders:
        return text + (f" It is open in pid {', '.join(map(str, holders))}, so another program may be using it: "
                       "choose another store path.")
    return text + f" If no training uses it any more, delete it ({delete}), or choose another store path."
