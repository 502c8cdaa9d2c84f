"""A script's steps as the run's steps (core/launch/scriptsteps.py): counted once, averaged over ranks."""

from __future__ import annotations

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.scriptsteps import HOLD_S, LAG_WAIT_S, SETTLE_STEPS, ScriptSteps


def step(rank: int, n: int, loss: float, **extra) -> protocol.Event:
    return protocol.make_event(protocol.STEP, rank=rank, step=n, loss=loss, **extra)


def test_a_step_is_averaged_once_every_rank_gave_it_and_comes_out_in_order():
    s = ScriptSteps(world_size=2)
    s.reported(step(0, 1, 1.0, samples_per_s=10.0))
    s.reported(step(0, 2, 0.5, samples_per_s=10.0))
    assert s.settle() == []  # rank 1 has not said step 1 yet, and only 1 later step was seen
    s.reported(step(1, 1, 3.0, samples_per_s=30.0))
    [g] = s.settle()
    assert (g.type, g.get("step"), g.get("loss"), g.get("samples_per_s"), g.get("ranks")) == (
        protocol.GLOBAL_STEP, 1, 2.0, 20.0, 2)


def test_a_rank_that_never_reports_does_not_hold_the_curve_back():
    s = ScriptSteps(world_size=2)
    for n in range(1, 2 + SETTLE_STEPS):
        s.reported(step(0, n, 1.0 / n))
    assert [g.get("step") for g in s.settle()] == [1]
    assert [(g.get("step"), g.get("ranks")) for g in s.settle(final=True)] == [(2, 1), (3, 1)]


def test_a_scraped_step_waits_and_is_dropped_when_its_rank_reports():
    s = ScriptSteps(world_size=1)
    printed = protocol.make_event(protocol.STEP, rank=0, step=1, loss=0.5, source="scraped")
    s.scraped(printed, now=100.0)
    assert s.release(0, now=100.0 + HOLD_S / 2) == []
    s.reported(step(0, 1, 0.5))
    assert s.release(0, now=100.0 + HOLD_S) == [] and s.release(0, now=200.0, final=True) == []
    [g] = s.settle()
    assert (g.get("step"), g.get("loss"), g.get("ranks")) == (1, 0.5, 1)


def test_a_scraped_step_of_a_rank_that_does_not_report_is_emitted_after_the_hold():
    s = ScriptSteps(world_size=2)
    printed = protocol.make_event(protocol.STEP, rank=1, step=3, loss=0.25, source="scraped")
    s.scraped(printed, now=10.0)
    assert s.release(1, now=10.0 + HOLD_S) == [printed]
    s.reported(step(0, 3, 0.75))
    assert [g.get("loss") for g in s.settle()] == [pytest.approx(0.5)]


def test_non_finite_losses_are_left_out_of_the_mean_and_late_steps_are_ignored():
    s = ScriptSteps(world_size=2)
    s.reported(step(0, 1, float("nan")))
    s.reported(step(1, 1, 2.0, total_steps=9))
    [g] = s.settle()
    assert (g.get("loss"), g.get("total_steps")) == (2.0, 9)
    s.reported(step(0, 1, 5.0))  # that step's mean is out already
    assert s.settle(final=True) == []


def test_a_step_waits_for_a_rank_that_gives_steps_and_is_read_behind_the_others():
    """Rank 0's steps 25-27 were read one pass after rank 1's 25-28: the global steps 25-27 were rank 1's alone
    (helper trial, Ignite under env style). A rank that gives steps is waited for, up to LAG_WAIT_S."""
    now = [0.0]
    s = ScriptSteps(world_size=2, clock=lambda: now[0])
    for n in (1, 2):
        s.reported(step(0, n, 1.0))
        s.reported(step(1, n, 3.0))
    assert [g.get("ranks") for g in s.settle()] == [2, 2]
    for n in (3, 4, 5, 6):
        s.reported(step(1, n, 3.0))
    assert s.settle() == []  # rank 0 gives steps and is at 2: its 3-6 are on their way
    s.reported(step(0, 3, 1.0))
    s.reported(step(0, 4, 1.0))
    now[0] = 0.5
    assert [(g.get("step"), g.get("loss"), g.get("ranks")) for g in s.settle()] == [(3, 2.0, 2), (4, 2.0, 2)]
    # a rank that stopped giving steps holds the curve back for LAG_WAIT_S at most
    for n in (7, 8):
        s.reported(step(1, n, 3.0))
    now[0] = 1.0
    assert s.settle() == []
    now[0] = LAG_WAIT_S + 0.1
    assert [(g.get("step"), g.get("ranks")) for g in s.settle()] == [(5, 1), (6, 1)]
