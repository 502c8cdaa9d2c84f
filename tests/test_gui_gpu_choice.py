"""The window's side of choosing GPUs (issue 23, section 4): a check box on each GPU card, the ranks and
plan following it, only the chosen GPUs' load plotted, presets, "Copy as command" and "Run again"
keeping it, and a preset that names a GPU no longer here shown as an error in the form.

GPUs come through the documented seam (``FakeGpuSource``, docs/gpu.md); pytest-qt drives the real window.
"""

from __future__ import annotations

import argparse

import pytest
from PySide6.QtCore import Qt

from ddpstudio.cli.run import add_parser, build_request
from ddpstudio.core.gpu import FakeGpuSource, detect_inventory
from ddpstudio.core.platform import current
from ddpstudio.core.policy import build_plan, write_plan
from ddpstudio.gui.command_line import run_arguments
from ddpstudio.gui.dialogs import ScriptedDialogs
from ddpstudio.gui.form_state import SetupState
from ddpstudio.gui.presets import Presets
from tests.test_gpu_choice import GPUS, UUIDS
from tests.test_gui_window import RUN_TIMEOUT_MS, open_window  # noqa: F401

pytestmark = pytest.mark.gui

GONE = "GPU-0ddba11-7777"


def three_gpus() -> FakeGpuSource:
    return FakeGpuSource(GPUS)


def settled(qtbot, window) -> None:
    qtbot.waitUntil(lambda: window.check.latest is not None and not window.check.pending, timeout=RUN_TIMEOUT_MS)


def gpu_window(qtbot, open_window, state=None, dialogs=None):  # noqa: F811
    window = open_window(state, source=three_gpus(), dialogs=dialogs)
    qtbot.waitUntil(lambda: len(window.machine_panel.cards) == 3, timeout=RUN_TIMEOUT_MS)
    settled(qtbot, window)
    return window


def untick(qtbot, card) -> None:
    qtbot.mouseClick(card.train, Qt.MouseButton.LeftButton, pos=card.train.rect().center())


def test_unticking_a_gpu_card_leaves_it_out_of_the_run_and_the_ranks_follow(qtbot, open_window):  # noqa: F811
    window = gpu_window(qtbot, open_window)
    cards = window.machine_panel.cards
    assert all(card.train.isChecked() and card.train.isEnabled() for card in cards)
    assert window.check.latest.plan.world_size == 3 and window.form.state().gpus == []
    untick(qtbot, cards[1])  # the display GPU
    assert window.form.state().gpus == [UUIDS[0], UUIDS[2]]
    qtbot.waitUntil(lambda: window.check.latest.plan is not None and window.check.latest.plan.world_size == 2
                    and not window.check.pending, timeout=RUN_TIMEOUT_MS)
    plan = window.check.latest.plan
    assert plan.env["CUDA_VISIBLE_DEVICES"] == f"{UUIDS[0]},{UUIDS[2]}"
    assert "GPUs 0 and 2 of 3, chosen by you" in window.machine_panel.decisions.text()
    assert window.form.effective.text().startswith("64 = 2 ranks × 32 per rank")
    # Only the chosen GPUs' load is plotted (the history still records all three).
    qtbot.waitUntil(lambda: set(window.plots.load.curves) == {0, 2}, timeout=RUN_TIMEOUT_MS)
    assert set(window.history.gpu_util) == {0, 1, 2}
    assert window.explainer.copy_command() == f"ddpstudio run --gpus {UUIDS[0]},{UUIDS[2]}"
    # The last ticked GPU cannot be unticked: a run trains on at least one.
    untick(qtbot, cards[2])
    assert window.form.state().gpus == [UUIDS[0]] and not cards[0].train.isEnabled()
    untick(qtbot, cards[0])
    assert cards[0].train.isChecked() and window.form.state().gpus == [UUIDS[0]]
    # Ticked again, all of them: no choice, every GPU (a preset saved so works on any machine).
    for card in cards[1:]:
        untick(qtbot, card)
    assert window.form.state().gpus == [] and all(card.train.isEnabled() for card in cards)
    qtbot.waitUntil(lambda: set(window.plots.load.curves) == {0, 1, 2}, timeout=RUN_TIMEOUT_MS)


def test_a_preset_keeps_the_gpus_and_one_naming_a_gone_gpu_is_an_error_in_the_form(qtbot, open_window,  # noqa: F811
                                                                                   studio_home):
    window = gpu_window(qtbot, open_window, dialogs=ScriptedDialogs(yes=True, texts=["two fast ones"]))
    cards, bar = window.machine_panel.cards, window.explainer.preset_bar
    untick(qtbot, cards[1])
    assert bar.save_current() == "two fast ones"
    window.form.set_state(SetupState())
    assert all(card.train.isChecked() for card in cards)

    def load(name: str) -> None:
        bar.reload(select=name)
        index = bar.combo.findData(name)
        with qtbot.waitSignal(bar.loaded):
            bar.combo.activated.emit(index)
        settled(qtbot, window)

    load("two fast ones")
    assert [card.train.isChecked() for card in cards] == [True, False, True]
    assert window.check.latest.plan.world_size == 2 and window.launch_action.isEnabled()
    # A preset from before a GPU was replaced: one clear error, in the form and on Launch; nothing starts.
    Presets(window.settings).save("old card", SetupState(gpus=[UUIDS[0], GONE]))
    load("old card")
    error = window.form.general_error
    assert error.isVisible() and error.text().startswith(f"GPU {GONE} is not in this machine"), error.text()
    assert "choose the GPUs again" in error.text()
    assert not window.launch_action.isEnabled()
    assert window.launch_button.toolTip().startswith(f"Launch is unavailable: GPUs: GPU {GONE} is not in")
    assert [card.train.isChecked() for card in cards] == [True, False, False]
    untick(qtbot, cards[2])  # ticking the GPUs again is the fix
    settled(qtbot, window)
    assert window.form.state().gpus == [UUIDS[0], UUIDS[2]] and not error.isVisible()
    assert window.launch_action.isEnabled()
    assert not (studio_home / "runs").exists() or not any((studio_home / "runs").iterdir())


def test_run_again_of_a_command_line_run_ticks_its_gpus(qtbot, open_window, studio_home):  # noqa: F811
    request = build_request(_parse(["--gpus", "2,0", "--max-steps", "3"]))
    plan = build_plan(request, current(), detect_inventory(three_gpus()), probe=lambda: None)
    write_plan(plan)  # a run the CLI planned: no saved form, the plan says which GPUs
    window = gpu_window(qtbot, open_window)
    window.runs_panel.run_again_requested.emit(plan.run_dir)
    qtbot.waitUntil(lambda: window.form.state().gpus == [UUIDS[0], UUIDS[2]], timeout=RUN_TIMEOUT_MS)
    assert [card.train.isChecked() for card in window.machine_panel.cards] == [True, False, True]
    settled(qtbot, window)
    assert window.check.latest.plan.world_size == 2


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(["run", *argv])


def test_copy_as_command_carries_the_gpus_and_parses_back_to_the_same_request():
    state = SetupState(gpus=[UUIDS[0], UUIDS[2]], max_steps=5)
    assert run_arguments(state) == ["--max-steps", "5", "--gpus", f"{UUIDS[0]},{UUIDS[2]}"]
    assert build_request(_parse(run_arguments(state))) == state.to_request()
    assert SetupState.from_dict({"gpus": [UUIDS[0], 7, None]}).gpus == [UUIDS[0]]  # a hand-edited file
    assert SetupState.from_dict({"gpus": "0,2"}).gpus == []


def test_eight_gpu_cards_with_check_boxes_stay_one_row_each(qtbot, open_window):  # noqa: F811
    gpus = [{"name": "NVIDIA RTX A6000", "total_memory_mb": 49140} for _ in range(8)]
    window = open_window(source=FakeGpuSource(gpus))
    window.resize(1280, 720)
    qtbot.waitUntil(lambda: len(window.machine_panel.cards) == 8, timeout=RUN_TIMEOUT_MS)
    card = window.machine_panel.cards[0]
    assert card.compact and card.train.isVisible()
    assert card.train.geometry().center().y() == pytest.approx(card.title.geometry().center().y(), abs=3)
