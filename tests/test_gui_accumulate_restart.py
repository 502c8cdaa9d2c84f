"""The window's gradient accumulation, checkpoint interval and "Keep training if a rank crashes" fields:
carried by the request, "Copy as command" and presets, checked like the others; restarts in the plots."""

from __future__ import annotations

import argparse

import pytest

from ddpstudio.cli.run import add_parser, build_request
from ddpstudio.core import protocol
from ddpstudio.core.plan import RecipeSpec, ScriptSpec
from ddpstudio.core.policy import Request
from ddpstudio.core.validate import check_recipe, check_restarts
from ddpstudio.gui.command_line import run_arguments
from ddpstudio.gui.form_state import SetupState
from ddpstudio.gui.run_metrics import RunMetrics
from tests.test_gui_window import open_window  # noqa: F401 (a fixture)

pytestmark = pytest.mark.gui
STATE = SetupState(batch_size=16, accumulate=2, checkpoint_dir="/c k", checkpoint_every=4, keep_training=True,
                   max_restarts=2, world_size=2)


def test_copy_as_command_carries_accumulation_checkpoints_and_restarts():
    args = run_arguments(STATE)
    assert args[args.index("--accumulate") + 1] == "2" and args[args.index("--checkpoint-every") + 1] == "4"
    assert args[args.index("--max-restarts") + 1] == "2"
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    request = build_request(parser.parse_args(["run", *args]))
    assert request == STATE.to_request()
    assert (request.recipe.accumulate, request.recipe.checkpoint_every, request.max_restarts) == (2, 4, 2)
    off = SetupState(max_restarts=5)  # a count without the check box restarts nothing
    assert off.to_request().max_restarts == 0 and "--max-restarts" not in run_arguments(off)
    assert SetupState.from_dict(STATE.to_dict()) == STATE  # what a preset saves and loads


def test_the_form_shows_the_effective_batch_with_its_micro_batches_and_the_restarts_row(qtbot, open_window):  # noqa: F811
    window = open_window(STATE)
    form = window.form
    assert form.state() == STATE
    assert form.effective.text().startswith("64 = 2 ranks × 16 per rank × 2 micro-batches")
    assert form.editors["max_restarts"].isVisibleTo(form)
    form.editors["keep_training"].setChecked(False)
    assert not form.editors["max_restarts"].isVisibleTo(form)
    form.editors["scale_lr"].setChecked(True)
    assert form.effective.text().endswith(f"learning rate {RecipeSpec.lr * 4:g}")  # x ranks x micro-batches


def test_bad_values_are_named_by_their_field():
    assert [p.field for p in check_recipe(RecipeSpec(model="mlp", accumulate=0))] == ["accumulate"]
    assert [p.field for p in check_recipe(RecipeSpec(model="mlp", checkpoint_every=3))] == ["checkpoint_every"]
    assert [p.field for p in check_restarts(Request(recipe=RecipeSpec(), max_restarts=-1))] == ["max_restarts"]
    spawn = Request(script=ScriptSpec(path="x.py", style="spawn"), max_restarts=1)
    assert "spawn style" in check_restarts(spawn)[0].message


def test_after_a_restart_the_curves_continue_from_the_checkpoint():
    m = RunMetrics(capacity=8)  # small: the thinned (averaged) part of a series is cut too
    for step in range(1, 12):
        m.feed(protocol.make_event(protocol.GLOBAL_STEP, step=step, loss=1.0 / step, total_steps=20))
    m.feed(protocol.make_event(protocol.RUN_RESTARTED, restart=1, max_restarts=3, from_step=6, cause="x", how="y"))
    assert m.restarts == 1 and m.step == 6 and m.eta_s() is None
    for step in range(7, 21):
        m.feed(protocol.make_event(protocol.GLOBAL_STEP, step=step, loss=1.0 / step, total_steps=20))
    x, _ = m.global_loss.data()
    assert list(x) == sorted(x) and m.global_loss.last == (20.0, 1.0 / 20)  # no line back to the redone steps
    assert m.step == 20
