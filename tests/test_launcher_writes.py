"""What the launcher pays per line a rank prints: one poll's events leave in one write (issue 20).

A script that prints its loss every step, hundreds of steps a second, makes the launcher emit several
events per line (the line itself, the step scraped from it, the global step). Written and flushed one
at a time, they cost the launcher more CPU than anything else it does, taken from the ranks on a
machine whose cores they fill: the launcher spent 134 us of CPU per printed line before, 93 us after,
and its front end 56 us before, 31 us after (2-core VM, load average 9-10, median of 3 interleaved
pairs; benchmarks/README.md, ``plain_scripts.py``). Two real Gloo ranks of
``tests/scripts/loss_burst.py`` print 300 loss lines each, in a burst; the real launcher loop runs
here, its stdout a string buffer that counts flushes.
"""

from __future__ import annotations

import io
import json

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.metrics import rows
from ddpstudio.core.plan import ScriptSpec
from ddpstudio.core.platform import current
from ddpstudio.core.policy import Request, build_plan, write_plan
from tests.studio import SCRIPTS, events, final, of_type
from tests.test_clean_e2e import _NoGpu, run_processes

STEPS = 300


class CountingOut(io.StringIO):
    """The launcher's stdout (the CLI's or the window's pipe): every flush is a write to that pipe."""

    flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


@pytest.mark.slow
def test_a_burst_of_printed_losses_reaches_the_front_end_in_few_writes_complete_and_in_order(studio_home):
    from ddpstudio.core.launch.launcher import Launcher, run

    script = ScriptSpec(path=str(SCRIPTS / "loss_burst.py"), args=["--steps", str(STEPS)])
    plan = build_plan(Request(world_size=2, script=script), current(), _NoGpu())
    write_plan(plan)
    out = CountingOut()
    code = run(Launcher(plan, out=out))
    evs = events(out.getvalue())
    assert code == protocol.EXIT_CODES["finished"], final(evs).data
    # Everything still arrives: every printed line, every scraped step, the global steps in order.
    printed = [e for e in of_type(evs, protocol.LOG) if e.get("stream") == "stdout"]
    assert len(printed) == 2 * STEPS
    assert len(of_type(evs, protocol.STEP)) == 2 * STEPS
    assert [e.get("step") for e in of_type(evs, protocol.GLOBAL_STEP)] == list(range(1, STEPS + 1))
    # One write per poll, not one per event: before, 1,500-odd events made as many flushes.
    assert out.flushes * 10 < len(evs), f"{out.flushes} flushes for {len(evs)} events"
    # The run folder holds the same stream, and the history every global loss.
    run_dir = RunDir.at(plan.run_dir)
    assert run_dir.merged_events.read_text(encoding="utf-8") == out.getvalue()
    history = [json.loads(line) for line in (run_dir.root / rows.FILE_NAME).read_text(encoding="utf-8").splitlines()]
    assert [r[2] for r in history if isinstance(r, list) and r[0] == rows.GLOBAL_LOSS] == list(range(1, STEPS + 1))
    assert run_processes(plan.run_id) == []
