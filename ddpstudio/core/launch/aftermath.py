"""When the launcher dies without a result: what became of its ranks, in one sentence for the user.

The ranks die with their launcher (parent-death signal and lifeline on POSIX,
the Job Object on Windows); this checks that they did, against the pids and
create times the launcher recorded in ``processes.json``, stops any that did
not (they are ours), and marks the run failed in the registry.
"""

from __future__ import annotations

import json
import time

from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.platform import Platform, current
from ddpstudio.core.process import killer
from ddpstudio.core.process.exitcodes import describe_exit
from ddpstudio.core.process.proctable import is_alive

WAIT_S = 5.0  # the kernel acts within milliseconds; this covers a loaded machine


def ranks_after_launcher_death(run_id: str, run_dir: str, launcher_exit: int | None, platform: Platform | None = None,
                               wait_s: float = WAIT_S) -> str:
    """Wait for the recorded ranks to go, stop the ones that do not, record the run failed; say what happened."""
    platform = platform or current()
    ended = describe_exit(launcher_exit, platform) if launcher_exit is not None else "still running"
    head = f"the launcher ended without reporting a result ({ended})"
    ranks = _recorded_ranks(run_dir)
    if ranks is None:
        return f"{head}; it recorded no ranks; see {run_dir}"
    deadline = time.monotonic() + wait_s
    alive = [r for r in ranks if is_alive(*r)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [r for r in alive if is_alive(*r)]
    gone = len(ranks) - len(alive)
    parts = [f"{gone} of its {len(ranks)} rank(s) ended with it"] if ranks else ["no rank had started"]
    left = _end_orphans([r for r in ranks if r not in alive], platform)
    if left:
        parts.append(f"ended {len(left)} process(es) the ranks had started (pid {', '.join(map(str, left))})")
    if alive:
        result = killer.stop([killer.Target(pid, created, group=True) for pid, created in alive],
                             platform)
        if result.stopped:
            parts.append("stopped the rest (pid " + ", ".join(map(str, result.stopped)) + ")")
        for pid, why in result.left:
            parts.append(f"pid {pid} is still running ({why}); run 'ddpstudio clean'")
    _record_failed(run_id, head)
    return f"{head}; " + "; ".join(parts) + f"; see {run_dir}"


def _end_orphans(dead_ranks: list[tuple[int, float | None]], platform: Platform) -> list[int]:
    """What dead ranks had started and left running (a script's own children), stopped; their pids.

    The parent-death signal kills a rank alone, so its children outlive it (POSIX; on Windows the Job
    Object takes them). ``ProcTable.descendants`` finds them by parent and by the rank's process group,
    never adopting a stranger through a reused pid.
    """
    if platform.is_windows or not dead_ranks:
        return []
    from ddpstudio.core.process.proctable import ProcTable

    table = ProcTable.take()
    orphans = {p.pid: p for pid, created in dead_ranks for p in table.descendants(pid, created, posix=True)}
    if not orphans:
        return []
    result = killer.stop([killer.Target(p.pid, p.create_time) for p in orphans.values()], platform)
    return list(result.stopped)


def _recorded_ranks(run_dir: str) -> list[tuple[int, float | None]] | None:
    try:
        raw = json.loads(RunDir.at(run_dir).processes.read_text(encoding="utf-8"))
        return [(int(r["pid"]), r.get("create_time")) for r in raw.get("ranks", [])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _record_failed(run_id: str, note: str) -> None:
    from ddpstudio.core.cleanup import registry

    try:
        registry.record_end(run_id, "failed", note)
    except OSError:
        pass
