"""Issue 23 §1: the script style follows the script's own gating of its spawn call.

The PyTorch examples' ImageNet ``main.py`` calls ``mp.spawn`` only under
``if args.multiprocessing_distributed:``; without that flag it is one rank per
process (args style). The scripts in tests/scripts are our own, with the
control flow of the public ones: ``imagenet_like.py`` (args-gated spawn),
``tutorial_spawn.py`` (the DDP tutorial's unconditional ``mp.spawn``),
``ddp_env_style.py`` (torchrun's env style) and ``start_processes_style.py``
(``torch.multiprocessing.start_processes``). One real 2-rank Gloo run of the
ImageNet structure through ``ddpstudio run --script``.
"""

from __future__ import annotations

import textwrap

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.scriptstyle import read_source, suggest_style
from tests.conftest import processes_of
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

IMAGENET = SCRIPTS / "imagenet_like.py"
OFF = ("the script calls mp.spawn() (line 41) only when `args.multiprocessing_distributed` (line 39) is true, and "
       "with its arguments it is not (--multiprocessing-distributed not given): one process per rank")


def style_of(script, *args: str):
    return suggest_style(read_source(SCRIPTS / script), list(args))


# -- the four public structures, as files ----------------------------------------------------------
def test_the_four_public_structures_each_get_their_style():
    assert style_of("imagenet_like.py") == style_of("imagenet_like.py", "DATA", "--arch", "resnet50")
    off = style_of("imagenet_like.py", "DATA", "--arch", "resnet50")
    assert (off.style, off.why, off.spawns) == ("args", OFF, False)
    flagged = style_of("imagenet_like.py", "DATA", "--multiprocessing-distributed")
    assert flagged.style == "spawn" and "its arguments contain --multiprocessing-distributed" in flagged.why
    # argparse takes a unique prefix of a long option: the call runs, the reason is the call itself
    assert style_of("imagenet_like.py", "DATA", "--multiprocessing").why == (
        "the script calls mp.spawn() (line 41): it starts its own ranks")
    # the earlier structure test script (blog_spawn.py) has the same gating
    assert style_of("blog_spawn.py", "--steps", "4").style == "args"
    # the DDP tutorial's unconditional spawn and start_processes: spawn style; torchrun's scripts: env style
    assert style_of("tutorial_spawn.py").why == "the script calls mp.spawn() (line 53): it starts its own ranks"
    started = style_of("start_processes_style.py")
    assert (started.style, started.why) == (
        "spawn", "the script calls torch.multiprocessing.start_processes() (line 32): it starts its own ranks")
    env = 'the script calls dist.init_process_group() with init_method="env://" (line {}): it joins through the ' \
          'environment variables torchrun sets'
    assert (style_of("ddp_env_style.py", "10").style, style_of("ddp_env_style.py", "10").why) == ("env", env.format(27))
    assert style_of("env_style.py").why == env.format(20)


# -- the general cases, as source ---------------------------------------------------------------------
PARSER = """
import argparse
import torch
import torch.multiprocessing as mp
parser = argparse.ArgumentParser()
parser.add_argument("--distributed", action="store_true")
parser.add_argument("--no-spawn", dest="spawn", action="store_false")
parser.add_argument("--launcher", choices=["none", "spawn"], default="none")
parser.add_argument("--world-size", type=int, default=1)
"""


def source(body: str) -> str:
    return PARSER + textwrap.dedent(body)


def test_a_spawn_in_the_else_of_a_negated_flag_or_after_an_early_return_is_off_without_the_flag():
    negated = source("""
        args = parser.parse_args()
        if not args.distributed:
            work(0)
        else:
            mp.spawn(work, nprocs=2)
        """)
    assert suggest_style(negated).why == (
        "the script calls mp.spawn() (line 15) only when `not args.distributed` (line 12) is false, and with its "
        "arguments it is not (--distributed not given): one process per rank")
    assert suggest_style(negated, ["--distributed"]).style == "spawn"
    early = source("""
        def main():
            opt = parser.parse_args()
            if opt.launcher != "spawn":
                return work(0)
            mp.spawn(work, nprocs=2)
        main()
        """)
    assert suggest_style(early).style == "args" and "(--launcher not given)" in suggest_style(early).why
    assert suggest_style(early, ["--launcher", "spawn"]).style == "spawn"
    assert suggest_style(early, ["--launcher=spawn"]).style == "spawn"
    store_false = source("""
        args, _rest = parser.parse_known_args()
        if args.spawn:
            mp.spawn(work, nprocs=2)
        """)
    assert suggest_style(store_false).style == "spawn"  # store_false: on unless --no-spawn
    assert suggest_style(store_false, ["--no-spawn"]).why.endswith("(--no-spawn given): one process per rank")


def test_an_alias_and_a_gpu_count_beside_the_flag_decide_only_as_far_as_the_arguments_go():
    aliased = source("""
        def get_args():
            return parser.parse_args()
        def main():
            cfg = get_args()
            ngpus = torch.cuda.device_count()
            use_mp = cfg.distributed
            if use_mp and ngpus > 1:
                mp.spawn(work, nprocs=ngpus)
            else:
                work(0)
        if __name__ == "__main__":
            main()
        """)
    off = suggest_style(aliased)
    assert (off.style, "`use_mp and ngpus > 1`" in off.why) == ("args", True), off.why
    # flag given: the GPU count is the script's business, not the arguments'; the call is the reason, as before
    assert suggest_style(aliased, ["--distributed"]).why == (
        "the script calls mp.spawn() (line 18): it starts its own ranks")


def test_a_condition_the_arguments_cannot_decide_keeps_spawn_style_and_says_why():
    by_launcher = source("""
        args = parser.parse_args()
        if args.world_size > 1:
            mp.spawn(work, nprocs=args.world_size)
        """)
    assert suggest_style(by_launcher).why == (
        "the script calls mp.spawn() (line 13): it starts its own ranks, unless `args.world_size > 1` (line 12) "
        "is false, which cannot be told from its arguments (--world-size set by the launcher)")
    computed = source("""
        args = parser.parse_args()
        args.distributed = args.world_size > 1
        if args.distributed:
            mp.spawn(work, nprocs=2)
        """)
    assert suggest_style(computed).style == "spawn" and "cannot be told" in suggest_style(computed).why
    # one call off, another unconditional: spawn, for the one that runs
    both = source("""
        args = parser.parse_args()
        if args.distributed:
            mp.spawn(work, nprocs=2)
        torch.multiprocessing.spawn(other, nprocs=2)
        """)
    assert suggest_style(both).why == (
        "the script calls torch.multiprocessing.spawn() (line 14): it starts its own ranks")


def test_spawn_functions_imported_by_name_and_options_declared_elsewhere():
    imported = ("from torch.multiprocessing import start_processes as launch\n"
                "import torch.multiprocessing as tmp\n"
                "launch(f, nprocs=2)\ntmp.spawn(f, nprocs=2)\n")
    assert suggest_style(imported).why == "the script calls launch() (line 3): it starts its own ranks"
    assert suggest_style(imported.replace("launch(f", "print(f")).why.startswith("the script calls tmp.spawn()")
    # No add_argument in the script (its parser lives in another module): nothing to read the gating by.
    elsewhere = "from config import args\nimport torch.multiprocessing as mp\nif args.ddp:\n    mp.spawn(f)\n"
    assert suggest_style(elsewhere).why == "the script calls mp.spawn() (line 4): it starts its own ranks"
    # A function handed on as a callback may run from there: its callers alone do not turn its spawn off.
    callback = source("""
        args = parser.parse_args()
        def launch():
            mp.spawn(work, nprocs=2)
        if args.distributed:
            launch()
        register(launch)
        """)
    assert suggest_style(callback).style == "spawn"
    assert suggest_style(callback.replace("register(launch)", "")).style == "args"


# -- the front ends -------------------------------------------------------------------------------------------
def test_the_window_command_line_leaves_out_the_style_the_cli_now_guesses():
    from ddpstudio.gui.command_line import run_arguments
    from ddpstudio.gui.form_state import SetupState

    state = SetupState(workload="script-args", script_path=str(IMAGENET), script_args="DATA --arch resnet50")
    assert run_arguments(state)[:2] == ["--script", str(IMAGENET)] and "--script-style" not in run_arguments(state)


@pytest.mark.gui
def test_the_window_keeps_one_process_per_rank_and_says_why(qtbot):
    from ddpstudio.gui.dialogs import ScriptedDialogs
    from ddpstudio.gui.form_state import SetupState
    from ddpstudio.gui.mainwindow import MainWindow
    from tests.test_gui_window import no_nvml

    window = MainWindow(dialogs=ScriptedDialogs(yes=True), gpu_source=no_nvml())
    qtbot.addWidget(window)
    window.form.set_state(SetupState(workload="script-args"))
    form, offer = window.form, window.form.style_offer
    form.editors["script_args"].setText("DATA --arch resnet50")
    form.editors["script_path"].setText(str(IMAGENET))
    assert form.state().workload == "script-args"
    assert offer.note.text() == f"One process per rank: {OFF}."
    form.editors["script_args"].setText("DATA --multiprocessing-distributed")
    assert form.state().workload == "script-spawn"
    form.editors["script_args"].setText("DATA")  # our own switch is undone with the flag
    assert form.state().workload == "script-args"


# -- a real run ----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_imagenet_structure_runs_two_ranks_in_args_style_through_the_cli(studio_home):
    res = ddpstudio("run", "--json", "--script", str(IMAGENET), "--world-size", "2", "--rendezvous-timeout", "60",
                    "--", "DATA", "--arch", "resnet50", "--steps", "4")
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    assert f"ddpstudio: script style args: {OFF} (--script-style spawn or env overrides)" in res.stderr
    evs = events(res.stdout)
    assert of_type(evs, protocol.RUN_STARTED)[0].get("script_style") == "args"
    started = of_type(evs, protocol.RANK_STARTED)
    assert sorted(e.rank for e in started) == [0, 1] and not any(e.get("spawned") for e in started)
    for ev in started:
        assert ev.get("command")[-4:] == ["--world-size", "2", "--rank", str(ev.rank)]
    joined = of_type(evs, protocol.RANK_JOINED)
    assert sorted(e.rank for e in joined) == [0, 1]
    assert {(e.get("world_size"), e.get("backend")) for e in joined} == {(2, "gloo")}
    steps = {rank: [e.get("loss") for e in of_type(evs, protocol.STEP) if e.rank == rank] for rank in (0, 1)}
    assert len(steps[0]) == len(steps[1]) == 4 and steps[0] == steps[1]  # DDP: the same model on both ranks
    assert steps[0][-1] < steps[0][0]
    done = final(evs)
    assert (done.get("state"), done.get("world_size")) == (protocol.FINISHED, 2)
    assert not processes_of(studio_home)
