"""A rank killed from outside is reported by its signal's name, not as "no error message"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ddpstudio.core import protocol
from tests.conftest import processes_of
from tests.studio import ENDLESS, TINY, events, final, of_type

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]


def test_a_rank_killed_by_sigkill_is_named_in_the_root_cause(studio_home):
    cli = subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--json", *ENDLESS, *TINY],
                           stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    seen: list[str] = []
    try:
        for line in cli.stdout:
            seen.append(line)
            if '"type":"global_step"' in line:
                break
        [victim] = [e.get("pid") for e in of_type(events("".join(seen)), protocol.RANK_STARTED) if e.rank == 1]
        os.kill(victim, signal.SIGKILL)
        out, _ = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    done = final(events("".join(seen) + out))
    assert cli.returncode == 1 and done.get("state") == protocol.FAILED
    assert done.get("root_cause")["rank"] == 1 and done.get("root_cause")["exit_code"] == -signal.SIGKILL
    assert done.get("summary").startswith("rank 1 was killed by SIGKILL (exit code -9)"), done.get("summary")
    assert "no error message" not in done.get("summary")
    assert not processes_of(studio_home)
