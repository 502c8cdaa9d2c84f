"""The window's gradient accumulation, checkpoint interval, "Keep training if a rank crashes", "Balance" and
"On a stuck rank" fields: carried by the request, the launched plan, "Copy as command", presets and "Run again",
checked like the others; restarts in the plots."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt

from ddpstudio.cli.run import add_parser, build_request
from ddpstudio.core import protocol
from ddpstudio.core.gpu import detect_inventory
from ddpstudio.core.plan import RecipeSpec, ScriptSpec
from ddpstudio.core.platform import current
from ddpstudio.core.policy import Request, build_plan, write_plan
from ddpstudio.core.validate import check_recipe, check_restarts
from ddpstudio.gui.command_line import run_arguments
from ddpstudio.gui.form_state import SetupState
from ddpstudio.gui.run_metrics import RunMetrics
from tests.test_gui_window import (DEMO, RUN_TIMEOUT_MS, assert_nothing_left, launch, no_nvml,  # noqa: F401
                                   open_window)

pytestmark = pytest.mark.gui
STATE = SetupState(batch_size=16, accumulate=2, checkpoint_dir="/c k", checkpoint_every=4, keep_training=True,
                   max_restarts=2, world_size=2)
BALANCED = SetupState(balance="measured", hang_timeout=30, on_hang="stop", world_size=2)


def _request(args: list[str]) -> Request:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return build_request(parser.parse_args(["run", *args]))


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


def test_copy_as_command_carries_balance_and_on_hang_only_when_not_default():
    args = run_arguments(BALANCED)
    assert args[args.index("--balance") + 1] == "measured" and args[args.index("--on-hang") + 1] == "stop"
    request = _request(args)
    assert request == BALANCED.to_request()
    assert (request.balance, request.on_hang, request.hang_timeout) == ("measured", "stop", 30.0)
    assert not {"--balance", "--on-hang"} & set(run_arguments(SetupState()))  # the CLI's defaults: auto, warn
    unwatched = SetupState(hang_timeout=0, on_hang="stop")  # "not watched": no stuck rank to stop on
    assert "--on-hang" not in run_arguments(unwatched) and unwatched.to_request().on_hang == "warn"
    script = SetupState(workload="script-env", script_path="train.py", balance="measured")  # the recipe's only
    expected = script.to_request()
    expected.script = replace(expected.script, cwd=os.getcwd())  # the CLI records the folder it ran in
    assert "--balance" not in run_arguments(script) and expected == _request(run_arguments(script))
    assert SetupState.from_dict(BALANCED.to_dict()) == BALANCED  # what a preset saves and loads


def test_balance_and_on_hang_set_in_the_form_reach_the_launched_plan_and_the_command_line(  # noqa: F811
        qtbot, open_window, studio_home):
    window = open_window(SetupState(model="mlp", batch_size=8, image_size=8, max_steps=3, world_size=1))
    form, e = window.form, window.form.editors
    assert not e["balance"].isVisibleTo(form)  # one rank: nobody to balance with
    e["world_size"].setValue(2)
    assert e["balance"].isVisibleTo(form) and e["on_hang"].isVisibleTo(form)
    assert e["balance"].itemData(e["balance"].findData("auto"), Qt.ItemDataRole.ToolTipRole).startswith(
        "Balances only when the run's GPUs have different names")
    e["balance"].setCurrentIndex(e["balance"].findData("measured"))
    e["on_hang"].setCurrentIndex(e["on_hang"].findData("stop"))
    line = window.explainer.copy_command()
    assert "--balance measured" in line and "--on-hang stop" in line, line
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        launch(qtbot, window)
        plan = window.controller.plan
        assert (plan.recipe.balance, plan.on_hang, plan.hang_timeout) == ("measured", "stop", 45.0)
        assert "balance" not in plan.auto
    assert finished.args[0].get("state") == protocol.FINISHED
    assert_nothing_left(qtbot, studio_home)
    e["hang_timeout"].setValue(0)
    assert not e["on_hang"].isVisibleTo(form) and "--on-hang" not in window.explainer.copy_command()


def test_run_again_of_a_command_line_run_restores_balance_and_on_hang(qtbot, open_window, studio_home):  # noqa: F811
    def planned(args: list[str]):
        plan = build_plan(_request(["--model", "mlp", "--max-steps", "3", *args]), current(),
                          detect_inventory(no_nvml()), probe=lambda: None)
        write_plan(plan)  # a run the CLI planned: no saved form, only the plan
        return plan

    window = open_window()
    chosen = planned(["--balance", "measured", "--on-hang", "stop", "--hang-timeout", "30"])
    window.runs_panel.run_again_requested.emit(chosen.run_dir)
    qtbot.waitUntil(lambda: window.form.state().max_steps == 3, timeout=RUN_TIMEOUT_MS)
    state = window.form.state()
    assert (state.balance, state.on_hang, state.hang_timeout) == ("measured", "stop", 30)
    assert window.form.editors["on_hang"].currentText() == "stop the run (failed)"
    window.form.set_state(SetupState())
    left = planned([])  # --balance auto resolves to equal batches on the CPU; "run again" keeps it auto
    assert left.recipe.balance == "equal" and "balance" in left.auto
    window.runs_panel.run_again_requested.emit(left.run_dir)
    qtbot.waitUntil(lambda: window.form.state().max_steps == 3, timeout=RUN_TIMEOUT_MS)
    assert (window.form.state().balance, window.form.state().on_hang) == ("auto", "warn")
