"""A rank that reported its error before Stop was pressed is the run's root cause, on every platform.

On Windows a rank that obeyed the stop file exits with a plain positive code, as a crashed one does;
the launcher once called any such exit during stopping "the stop" there, so a genuine crash just
before Stop made the run "stopped" (issue 19, item 8). Two real rank processes, the real launcher
loop; the Windows platform comes through the seam, with the POSIX process tree asking the Windows
way (the stop file only, STOP_CHANNEL_ENV): a Job Object cannot be made on Linux.
"""

from __future__ import annotations

import io

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.plan import ScriptSpec
from ddpstudio.core.platform import LINUX, WINDOWS, current
from ddpstudio.core.policy import Request, build_plan, write_plan
from ddpstudio.core.process.proctree import STOP_CHANNEL_ENV, PosixTree
from tests.studio import SCRIPTS, events, final
from tests.test_clean_e2e import _NoGpu, run_processes

SCRIPT = SCRIPTS / "error_before_stop.py"


class StopOnError(io.StringIO):
    """The launcher's stdout: the moment rank 1's error shows, the user presses Stop."""

    launcher = None

    def write(self, text: str) -> int:
        if self.launcher is not None and '"type":"error"' in text:
            self.launcher.request_stop("the user pressed Stop")
        return super().write(text)


@pytest.mark.slow
@pytest.mark.posix_only("the POSIX tree stands in for the Job Object")
@pytest.mark.parametrize("platform", [LINUX, WINDOWS], ids=["linux", "windows"])
def test_an_error_reported_just_before_stop_is_the_root_cause(studio_home, monkeypatch, platform):
    from ddpstudio.core.launch import launcher as launcher_module
    from ddpstudio.core.launch.launcher import Launcher, run

    monkeypatch.setenv(STOP_CHANNEL_ENV, "file")  # the polite stop is the stop file, as on Windows
    monkeypatch.setattr(launcher_module, "make_tree", lambda _platform, stop_file=None: PosixTree(LINUX, stop_file))
    request = Request(world_size=2, script=ScriptSpec(path=str(SCRIPT), style="env"))
    plan = build_plan(request, current(), _NoGpu())
    write_plan(plan)
    out = StopOnError()
    launcher = Launcher(plan, out=out, platform=platform)
    out.launcher = launcher
    code = run(launcher)
    done = final(events(out.getvalue()))
    assert launcher.stop_requested.is_set(), "Stop was pressed"
    assert done.get("state") == protocol.FAILED, done.data
    assert code == protocol.EXIT_CODES["failed"]
    root = done.get("root_cause")
    assert root["rank"] == 1 and "illegal memory access" in done.get("summary"), done.data
    assert run_processes(plan.run_id) == []
