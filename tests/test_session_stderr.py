"""The launcher a Session starts has a stderr that works, even when ours does not (issue 19, item 10).

Under pythonw the window (which runs the benchmarks' Sessions) has no stderr: ``sys.stderr`` is None
and CPython's subprocess gives a child the write end of a pipe whose read end it closed
(Lib/subprocess.py ``_get_handles``). Reproduced for real: the front end here is a child process whose
fd 2 is such a pipe and whose ``sys.stderr`` is None. Before, the launcher's first word on stderr
raised: a refusal ended as a bare exit 1 and a crash without its run_finished.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.endings import EXIT_REFUSED
from ddpstudio.core.launch.session import LAUNCHER_MODULE
from ddpstudio.core.plan import RecipeSpec
from ddpstudio.core.platform import current
from ddpstudio.core.policy import Request, build_plan
from tests.studio import events, final
from tests.test_clean_e2e import _NoGpu

REPO = Path(__file__).resolve().parents[1]

FRONT_END = """
import json, sys
sys.stderr = None  # pythonw's; fd 2 is a pipe that nobody reads
from ddpstudio.core.launch.session import Session
from ddpstudio.core.plan import Plan

session = Session(Plan.read(sys.argv[1]), module=sys.argv[2])
session.start()
lines = [event.to_line() for event in session.events()]
print(json.dumps({"events": lines, "returncode": session.returncode, "last_words": getattr(session, "last_words", None)}))
"""


def front_end_without_stderr(plan_path: Path, module: str) -> dict:
    unread, fd2 = os.pipe()
    try:
        # The launcher starts with -P (no working folder on sys.path): a launcher module of the tests' own
        # (tests.scripts.crashing_launcher) is found through PYTHONPATH instead.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
        proc = subprocess.Popen([sys.executable, "-c", FRONT_END, str(plan_path), module], cwd=REPO, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=fd2, text=True)
    finally:
        os.close(fd2)
        os.close(unread)  # before the launcher says anything: every write to it fails (EPIPE)
    try:
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def plan_file(tmp_path: Path, **changes) -> Path:
    plan = build_plan(Request(recipe=RecipeSpec(model="mlp", image_size=8, batch_size=8, max_steps=100000)), current(), _NoGpu())
    for key, value in changes.items():
        setattr(plan, key, value)
    return plan.write(tmp_path / "plan.json")


@pytest.mark.posix_only("builds the pythonw-like parent with os.pipe and fd inheritance")
def test_a_refusal_keeps_its_message_without_our_stderr(studio_home, tmp_path):
    result = front_end_without_stderr(plan_file(tmp_path, world_size=0), LAUNCHER_MODULE)
    done = final(events("\n".join(result["events"])))
    assert result["returncode"] == EXIT_REFUSED
    assert done.get("state") == protocol.FAILED and "needs at least 1" in done.get("summary"), done.data
    assert "ddpstudio: error:" in result["last_words"] and "needs at least 1" in result["last_words"]


@pytest.mark.slow
@pytest.mark.posix_only("builds the pythonw-like parent with os.pipe and fd inheritance")
def test_a_launcher_crash_still_ends_its_stream_without_our_stderr(studio_home, tmp_path):
    result = front_end_without_stderr(plan_file(tmp_path), "tests.scripts.crashing_launcher")
    done = final(events("\n".join(result["events"])))
    assert result["returncode"] == protocol.EXIT_CODES["failed"]
    assert done.get("state") == protocol.FAILED
    assert "the launcher itself failed (RuntimeError: a bug in the loop)" in done.get("summary"), done.data
    assert "RuntimeError: a bug in the loop" in result["last_words"]  # its traceback, read by the Session
