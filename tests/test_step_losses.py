"""A script that prints no loss still has a loss curve and counts as trained: the rank helper sees its steps.

Lightning's rich progress bar draws only at the end when its output is no terminal, Hugging Face's Trainer
logs every 500 steps (Transformers 5 with its numbers quoted), many scripts print once an epoch. Before, such a
run had no curve, and one whose lines held no loss at all ended "finished, but nothing trained" (exit 4) after
training well. The helper now notes the loss of each backward pass and closes a step at each optimizer step
(rank/steploss.py). Real runs: 2 Gloo ranks of tests/scripts/quiet_steps.py, which writes the loss of every
step it really took for the test to compare.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.rank import steploss
from tests.conftest import assert_none_left
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

SCRIPT = SCRIPTS / "quiet_steps.py"
STEPS = 120


def run(out: Path, *script_args: str):
    """A run in a DDP Studio home of its own under ``out`` (a module's fixture comes before the per-test home),
    checked afterwards for processes left, as every test's home is."""
    home = out / "home"
    try:
        res = ddpstudio("run", "--json", "--script", str(SCRIPT), "--world-size", "2", "--", "--out", str(out),
                        *script_args, env={**os.environ, "DDPSTUDIO_HOME": str(home)})
    finally:
        assert_none_left(home)
    evs = events(res.stdout)
    assert res.returncode == 0, res.stderr[-2000:]
    assert final(evs).get("state") == "finished", final(evs).data
    return evs, {rank: json.loads((out / f"rank{rank}.json").read_text(encoding="utf-8")) for rank in (0, 1)}


def steps_of(evs, rank: int):
    return [e for e in of_type(evs, protocol.STEP) if e.rank == rank]


@pytest.fixture(scope="module")
def framework_like(tmp_path_factory):
    """What a framework does around backward, all at once: 3 micro-batches a step on loss / 3, a GradScaler
    whose third step is skipped (infinite gradients), a second optimizer stepped after the first, and each batch
    forwarded twice for its loss, by a DDP wrapper left in eval mode around a module that trains (Lightning's),
    and an evaluation line printed after iteration 5."""
    out = tmp_path_factory.mktemp("losses")
    return run(out, "--steps", str(STEPS), "--accumulate", "3", "--scaler", "--inf-at", "3", "--second-optimizer",
               "--two-views", "--wrapper-eval", "--eval-at", "5")


def test_a_script_that_prints_no_loss_finishes_trained_with_each_steps_loss(framework_like):
    evs, taken = framework_like
    for rank in (0, 1):
        assert len(taken[rank]) == STEPS - 1  # the skipped step is no step
        steps = steps_of(evs, rank)
        assert {e.get("source") for e in steps} == {protocol.OBSERVED}
        first = steps[:steploss.EVERY_STEP]
        assert [e.get("step") for e in first] == list(range(1, steploss.EVERY_STEP + 1))
        # Each is the step's unscaled loss, the mean of its micro-batches (the script backs each with loss / 3
        # times the scaler's 1024), never the second optimizer's (500 and more).
        assert [e.get("loss") for e in first] == pytest.approx(taken[rank][:steploss.EVERY_STEP], rel=1e-5)
    means = {e.get("step"): e.get("loss") for e in of_type(evs, protocol.GLOBAL_STEP)}
    for step in (1, 2, 3, steploss.EVERY_STEP):
        assert means[step] == pytest.approx((taken[0][step - 1] + taken[1][step - 1]) / 2, rel=1e-5)


def test_after_the_first_steps_each_report_is_the_mean_of_the_steps_since_the_last(framework_like):
    evs, taken = framework_like
    for rank in (0, 1):
        later = steps_of(evs, rank)[steploss.EVERY_STEP:]
        assert len(later) < STEPS - 1 - steploss.EVERY_STEP  # fast steps: reported a window at a time
        covered = steploss.EVERY_STEP
        for e in later:
            step, count = e.get("step"), e.get("steps")
            assert step - count == covered  # the windows follow each other, none left out
            assert e.get("loss") == pytest.approx(sum(taken[rank][step - count:step]) / count, rel=1e-5)
            covered = step
        assert covered == STEPS - 1  # the last steps are reported at the end


def test_each_report_counts_the_samples_its_steps_forwarded_and_gives_the_runs_rate(framework_like):
    evs, _ = framework_like
    for rank in (0, 1):
        steps = steps_of(evs, rank)
        # 3 micro-batches of 16 in every iteration, the skipped one's too (its samples go to the next report);
        # each batch counted once though forwarded twice; the second model is no DDP model and counts none.
        assert sum(e.get("samples") for e in steps) == 3 * 16 * STEPS
        assert [e.get("samples") for e in steps[:5]] == [48, 48, 96, 48, 48]  # iteration 3 was skipped
        assert steps[0].get("samples_per_s") is None  # its time includes the script's set-up
        assert all(e.get("samples_per_s") > 0 for e in steps[1:])
    rates = [e.get("samples_per_s") for e in of_type(evs, protocol.GLOBAL_STEP)]
    assert rates[0] is None and all(rate > 0 for rate in rates[1:])


def test_fsdps_own_grad_scaler_is_read_unscaled_too(tmp_path):
    """ShardedGradScaler overrides scale (it does not call GradScaler's), and its class is first used after the
    helper installed its watch: its first instance has it watched."""
    evs, taken = run(tmp_path, "--steps", "6", "--scaler", "sharded", "--inf-at", "2")
    for rank in (0, 1):
        assert len(taken[rank]) == 5  # the second step skipped, on both ranks (found_inf is all-reduced)
        steps = steps_of(evs, rank)
        assert [e.get("step") for e in steps] == [1, 2, 3, 4, 5]
        assert [e.get("loss") for e in steps] == pytest.approx(taken[rank], rel=1e-5)  # not 1024 times them


def test_a_script_that_reports_its_own_steps_gets_none_of_the_helpers(tmp_path):
    evs, taken = run(tmp_path, "--steps", "5", "--report")
    for rank in (0, 1):
        steps = steps_of(evs, rank)
        assert [e.get("step") for e in steps] == [0, 1, 2, 3, 4]  # its own numbering
        assert all(e.get("source") is None for e in steps)
        assert [e.get("loss") for e in steps] == pytest.approx([v + 1000.0 for v in taken[rank]])
    assert sorted(e.get("step") for e in of_type(evs, protocol.GLOBAL_STEP)) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("step_s", "stride"), [(1.0, 1), (0.05, 1), (0.04, 2), (0.01, 8), (0.001, 64), (0.0, 4096)])
def test_the_stride_keeps_reports_near_twenty_a_second(step_s, stride):
    assert steploss._stride(step_s) == stride


def test_the_benchmark_prints_its_table():
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    res = subprocess.run([sys.executable, str(root / "benchmarks" / "step_losses.py"), "--rounds", "2", "--steps",
                          "200"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, cwd=root)
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if line.startswith("| the ")]
    assert [row.split(" | ")[0] for row in rows] == ["| the cheapest real step", "| the watch's work for it"]
    share = float(rows[1].rsplit("|", 2)[-2].strip().rstrip("%"))
    assert 0 < share < 100  # the watch costs something, and less than the step it watches
    assert "reports written" in res.stdout and "; 0 reports" not in res.stdout


def test_an_evaluation_line_is_placed_after_the_step_it_was_printed_after(framework_like):
    """However many steps the rank took before the launcher read the line: the helper's step events say how much
    the rank had written when each step closed (an Ignite run's evaluation after step 24 was placed at 31 to 48,
    the step the launcher had read up to; helper trial, 2026-12-07). Iteration 3's step was skipped by the
    scaler, so iteration 5 is the rank's step 4."""
    evs, _taken = framework_like
    for rank in (0, 1):
        assert [(e.get("step"), e.get("loss")) for e in of_type(evs, protocol.EVAL) if e.rank == rank] == [
            (4, 0.25 + rank)]
    marked = [e for e in steps_of(evs, 0) if e.get("out_at") is not None]
    assert marked and all(later.get("out_at") >= earlier.get("out_at") for earlier, later in zip(marked, marked[1:]))
