"""A script without ``if __name__ == "__main__":`` whose DataLoader workers start by spawning (Windows' only way).

Each worker imports the script again and runs its top level: its ``init_process_group`` made a second
process group in the worker (seen with two ranks: "EADDRINUSE" from rank 0's worker, whose TCP store port
its own rank holds; one rank here, since the worker is what matters), the worker died, and the root cause
read "DataLoader worker (pid(s) ...) exited unexpectedly", with the busy-port hint pointing at orphaned ranks. The rank helper now refuses that second call and states why
(rank/script_hooks.py ``REIMPORTED_MAIN``), and the window's hint says what to change.
"""

from __future__ import annotations

import pytest

from ddpstudio.core import protocol
from ddpstudio.rank.script_hooks import REIMPORTED_MAIN
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type


@pytest.mark.slow
def test_a_worker_that_runs_the_scripts_top_level_again_is_the_stated_root_cause(studio_home):
    from ddpstudio.core.hints import hints_for

    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "no_main_guard.py"), "--world-size", "1")
    done = final(events(res.stdout))
    assert res.returncode == 1 and done.get("state") == protocol.FAILED, res.stderr[-3000:]
    cause = done.get("root_cause")
    assert done.get("summary") == f"rank {cause['rank']} failed first (exit code 1): {REIMPORTED_MAIN}"
    assert REIMPORTED_MAIN in [e.get("message") for e in of_type(events(res.stdout), protocol.ERROR)]
    assert [h.key for h in hints_for(done.get("summary"), cause.get("message"))] == ["main_guard"]
    assert "EADDRINUSE" not in done.get("summary")
