"""Scripts whose library starts their ranks (core/liblaunch.py): Lightning's spawn strategies and Ignite's
``idist.Parallel(nproc_per_node=...)`` run once, in spawn style, with no distributed arguments appended.

Helper trials on 2026-12-07 (Lightning 2.6.6, pytorch-ignite 0.5.5, 2 Gloo ranks on the CPU): both got env style,
each of the 2 copies started 2 processes of its own, and the run failed on DDP Studio's own MASTER_PORT ("port
... is already in use ... If your script sets this port") or, for a LightningCLI with ``--trainer.strategy
ddp_spawn``, ended "finished" after two groups had trained one after the other. A fire-based Ignite script got
the args template, which fire handed to ``idist.Parallel``: "got multiple values for keyword argument
'world_size'".
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.argsfit import fit_template
from ddpstudio.core.plan import DEFAULT_DIST_ARGS, DEFAULT_SPAWN_ARGS
from ddpstudio.core.scriptargs import parse_script
from ddpstudio.core.scriptstyle import suggest_style
from tests.conftest import processes_of
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

IGNITE_SCRIPT = SCRIPTS / "ignite_parallel.py"
LIGHTNING = '''import lightning as L
from lightning.pytorch.strategies import DDPStrategy

model = Model()
trainer = L.Trainer(accelerator="cpu", devices=2, strategy={strategy}, max_steps=30)
trainer.fit(model)
'''
LIGHTNING_CLI = "from lightning.pytorch.cli import LightningCLI\nLightningCLI(Model, Data)\n"
IGNITE_FIRE = '''import fire
import ignite.distributed as idist

def run(backend=None, nproc_per_node=None, **spec_kwargs):
    spawn_kwargs = {"nproc_per_node": nproc_per_node}
    with idist.Parallel(backend=backend, **spawn_kwargs) as parallel:
        parallel.run(training, spec_kwargs)

if __name__ == "__main__":
    fire.Fire({"run": run})
'''


def style_of(source: str, args: list[str] | tuple[str, ...] = ()) -> tuple[str, str] | None:
    found = suggest_style(source, list(args))
    return None if found is None else (found.style, found.why)


@pytest.mark.parametrize("strategy", ['"ddp_spawn"', '"ddp_fork"', '"ddp_notebook"',
                                      '"ddp_spawn_find_unused_parameters_true"'])
def test_lightnings_spawning_strategies_are_spawn_style(strategy):
    assert style_of(LIGHTNING.format(strategy=strategy)) == (
        "spawn", f"the script asks Lightning for strategy={strategy} (line 5): Lightning starts the ranks itself")


def test_lightnings_torchrun_strategies_stay_env_style():
    """``strategy="ddp"``'s launcher stays out of the way under torchrun's variables: env style, as before."""
    for strategy in ('"ddp"', '"auto"', 'args.strategy', 'DDPStrategy(find_unused_parameters=True)'):
        assert style_of(LIGHTNING.format(strategy=strategy))[0] == "env", strategy
    assert style_of(LIGHTNING.format(strategy='DDPStrategy(start_method="spawn")')) == (
        "spawn", 'the script asks Lightning for DDPStrategy(start_method="spawn") (line 5): Lightning starts the '
                 "ranks itself")


def test_a_spawning_strategy_or_process_count_kept_in_a_name_or_an_options_default_is_read():
    """Helper re-test of 2026-12-07 (V4, V5, V8): ``STRATEGY = "ddp_spawn"`` at the top, an argparse
    ``default="ddp_spawn"`` and ``NPROC = 2`` were not read, and each copy started a group of its own until the
    safety net stopped the run. A name assigned once and an option's literal default are values too."""
    named = "import lightning as L\nSTRATEGY = 'ddp_spawn'\n\ndef main():\n    L.Trainer(strategy=STRATEGY)\n"
    assert style_of(named) == ("spawn", 'the script asks Lightning for strategy=STRATEGY, which is "ddp_spawn" here '
                                        "(line 5): Lightning starts the ranks itself")
    by_default = ("import argparse\nimport lightning as L\np = argparse.ArgumentParser()\n"
                  "p.add_argument('--strategy', default='ddp_spawn')\nargs = p.parse_args()\n"
                  "L.Trainer(accelerator='cpu', strategy=args.strategy)\n")
    assert style_of(by_default) == ("spawn", 'the script asks Lightning for strategy=args.strategy, which is '
                                             '"ddp_spawn" here (line 6): Lightning starts the ranks itself')
    assert style_of(by_default, ["--strategy", "ddp"])[0] == "env"  # the user's own choice wins
    start = "import lightning as L\nMETHOD = 'fork'\nL.Trainer(strategy=DDPStrategy(start_method=METHOD))\n"
    assert style_of(start)[0] == "spawn"
    nproc = "import ignite.distributed as idist\nNPROC = 2\nwith idist.Parallel(backend='gloo', nproc_per_node=NPROC):\n"
    assert style_of(nproc + "    pass\n") == (
        "spawn", "the script calls idist.Parallel(nproc_per_node=NPROC, which is 2 here) (line 3): Ignite starts "
                 "the ranks itself")
    one = "from accelerate import notebook_launcher\nN = {n}\nnotebook_launcher(train, (), num_processes=N)\n"
    assert style_of(one.format(n=2))[0] == "spawn"
    assert style_of(one.format(n=1))[0] == "env"  # one process: Accelerate starts none
    # a name assigned twice, or from what cannot be read, decides nothing
    twice = "import lightning as L\nS = 'ddp_spawn'\nif x:\n    S = 'ddp'\nL.Trainer(strategy=S)\n"
    assert style_of(twice)[0] == "env"


def test_a_lightning_cli_asked_for_ddp_spawn_in_its_arguments_or_config_is_spawn_style(tmp_path):
    for args, said in ((["fit", "--trainer.strategy", "ddp_spawn"], "--trainer.strategy ddp_spawn"),
                       (["fit", "--trainer.strategy=ddp_spawn"], "--trainer.strategy=ddp_spawn")):
        assert style_of(LIGHTNING_CLI, args) == (
            "spawn", f"its arguments ask Lightning for the ddp_spawn strategy ({said}): Lightning starts the ranks "
                     "itself")
    # in the YAML its --config names (helper re-test: env style, two groups one after the other, "finished")
    script = tmp_path / "cli.py"
    script.write_text(LIGHTNING_CLI, encoding="utf-8")
    (tmp_path / "config.yaml").write_text("seed_everything: 42\ntrainer:\n  accelerator: cpu\n  devices: 2\n"
                                          "  strategy: 'ddp_spawn'  # Lightning starts them\n", encoding="utf-8")
    for args in (["fit", "--config", "config.yaml"], ["fit", "-c", "config.yaml"], ["fit", "--config=config.yaml"]):
        found = suggest_style(LIGHTNING_CLI, args, str(script))
        assert (found.style, found.why) == ("spawn", "its config file config.yaml asks Lightning for the ddp_spawn "
                                                     "strategy (line 5): Lightning starts the ranks itself"), args
    (tmp_path / "config.yaml").write_text("trainer:\n  strategy: ddp\n", encoding="utf-8")
    assert suggest_style(LIGHTNING_CLI, ["fit", "--config", "config.yaml"], str(script)).style == "env"
    assert suggest_style(LIGHTNING_CLI, ["fit", "--config", "missing.yaml"], str(script)).style == "env"
    assert style_of(LIGHTNING_CLI, ["fit", "--trainer.strategy", "ddp"])[0] == "env"
    # the same words in a script that does not use Lightning decide nothing
    assert style_of("import argparse\nargparse.ArgumentParser().parse_known_args()\n",
                    ["--strategy", "ddp_spawn"]) is None


def test_ignites_parallel_is_spawn_style_when_it_is_given_processes_to_start():
    source = IGNITE_SCRIPT.read_text(encoding="utf-8")
    assert style_of(source, ["--backend", "gloo", "--nproc_per_node", "2"]) == (
        "spawn", "the script calls idist.Parallel() (line 53) and its arguments give nproc_per_node 2: Ignite "
                 "starts the ranks itself")
    # without it, Parallel takes torchrun's variables: env style
    assert style_of(source, ["--backend", "gloo"]) == (
        "env", "the script imports ignite (line 7): its distributed set-up reads the variables torchrun sets")
    assert style_of("import ignite.distributed as idist\nidist.Parallel(backend='gloo', nproc_per_node=4)\n") == (
        "spawn", "the script calls idist.Parallel(nproc_per_node=4) (line 2): Ignite starts the ranks itself")
    assert style_of(IGNITE_FIRE, ["run", "--backend=gloo", "--nproc_per_node=2"])[0] == "spawn"
    assert style_of(IGNITE_FIRE, ["run", "--backend=gloo"])[0] == "env"


def test_the_spawn_template_is_left_out_for_a_script_that_declares_none_of_its_options():
    fitted = fit_template(DEFAULT_SPAWN_ARGS, parse_script(IGNITE_FIRE), spawn=True)
    assert fitted.template == "" and fitted.why == (
        "distributed arguments (none): the script declares none of --dist-url, --dist-backend, --world-size, "
        "--rank, and sets up the ranks it starts itself")
    # ImageNet's main.py declares them and hands them to its ranks: kept
    imagenet = ("import argparse\np = argparse.ArgumentParser()\nfor o in ('--dist-url', '--dist-backend'):\n"
                "    pass\np.add_argument('--dist-url')\np.add_argument('--dist-backend')\n"
                "p.add_argument('--world-size')\np.add_argument('--rank')\np.parse_args()\n")
    assert fit_template(DEFAULT_SPAWN_ARGS, parse_script(imagenet), spawn=True).template == DEFAULT_SPAWN_ARGS
    # args style keeps the template where the parser cannot be read (its contract: each rank gets it)
    assert fit_template(DEFAULT_DIST_ARGS, parse_script(IGNITE_FIRE)).template == DEFAULT_DIST_ARGS


@pytest.mark.slow
def test_an_ignite_script_that_starts_its_ranks_runs_once_and_trains_as_one_run(tmp_path):
    home = tmp_path / "home"
    res = ddpstudio("run", "--json", "--script", str(IGNITE_SCRIPT), "--", "--backend", "gloo",
                    "--nproc_per_node", "2", env={**os.environ, "DDPSTUDIO_HOME": str(home)})
    assert not processes_of(home), "a process of the run was left running"
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    assert "script style spawn: the script calls idist.Parallel() (line 53) and its arguments give" in res.stderr
    evs = events(res.stdout)
    assert final(evs).get("state") == protocol.FINISHED and final(evs).get("world_size") == 2
    [started] = of_type(evs, protocol.RUN_STARTED)
    assert any(r.startswith("distributed arguments (none)") for r in started.get("reasons"))
    [script] = [e for e in of_type(evs, protocol.RANK_STARTED) if not e.get("spawned")]
    assert script.get("command")[-4:] == ["--backend", "gloo", "--nproc_per_node", "2"]  # nothing appended
    assert sorted(e.rank for e in of_type(evs, protocol.RANK_JOINED)) == [0, 1]
    printed = re.compile(r"rank (\d) Epoch\[\d\] Iteration\[(\d+)\] Loss: ([\d.]+)")
    for rank in (0, 1):
        lines = [m for e in of_type(evs, protocol.LOG) if e.rank == rank and (m := printed.search(e.get("line")))]
        assert [int(m.group(2)) for m in lines] == list(range(1, 13)), "6 iterations an epoch on each of 2 ranks"
        assert {int(m.group(1)) for m in lines} == {rank}  # each process's lines are its own rank's
        steps = [e for e in of_type(evs, protocol.STEP) if e.rank == rank]
        assert [e.get("step") for e in steps] == list(range(1, 13))
        assert [round(e.get("loss"), 4) for e in steps] == [float(m.group(3)) for m in lines]
    assert [(e.get("step"), e.get("ranks")) for e in of_type(evs, protocol.GLOBAL_STEP)] == [(s, 2) for s in range(1, 13)]
    validation = [float(e.get("line").rsplit(" ", 1)[1]) for e in of_type(evs, protocol.LOG)
                  if "Validation Results" in (e.get("line") or "")]
    assert [round(e.get("loss"), 4) for e in of_type(evs, protocol.EVAL) if e.rank == 0] == validation
    assert [e.get("step") for e in of_type(evs, protocol.EVAL) if e.rank == 0] == [6, 12]  # after each epoch
    assert len(validation) == 2
    assert not of_type(evs, protocol.WARNING)


# -- launchers out of the script's file: its project's own, Accelerate's notebook_launcher, detectron2, runpy -------
PROJECT_TOOL = SCRIPTS / "project_launch" / "tools" / "train_net.py"


def test_a_launch_function_of_the_scripts_own_project_is_read_where_it_is_defined():
    """detectron2's layout: tools/train_net.py calls launch() from the project's package one folder up, whose
    launch.py starts the processes (helper trial: args style, "unrecognized arguments: --dist-backend")."""
    source = PROJECT_TOOL.read_text(encoding="utf-8")
    assert style_of_at(source, PROJECT_TOOL, ["--num-gpus", "2"]) == (
        "spawn", "the script calls launch() (line 33), which starts processes itself (mp.start_processes() in "
                 "proj/engine/launch.py, line 16): it starts its own ranks")
    assert suggest_style(source, ["--num-gpus", "2"]) is None  # without its path, the file alone says nothing
    # a function of the project that starts nothing is no sign
    assert style_of_at(source.replace("launch(main,", "argument_parser(main,"), PROJECT_TOOL, []) is None


def style_of_at(source: str, path: Path, args: list[str]) -> tuple[str, str] | None:
    found = suggest_style(source, args, str(path))
    return None if found is None else (found.style, found.why)


def test_accelerates_notebook_launcher_detectron2s_launch_and_torchrun_run_by_runpy_start_ranks():
    notebook = "from accelerate import notebook_launcher\nnotebook_launcher(train, args=(1,), num_processes={n})\n"
    assert style_of(notebook.format(n=2)) == (
        "spawn", "the script calls notebook_launcher() (line 2): Accelerate starts the ranks itself")
    assert style_of(notebook.format(n=1))[0] == "env"  # one process: Accelerate's own set-up reads the variables
    assert style_of("from accelerate import notebook_launcher\nnotebook_launcher(train, (1,))\n")[0] == "env"
    detectron2 = ("from detectron2.engine import default_argument_parser, launch\n"
                  "args = default_argument_parser().parse_args()\n"
                  "launch(main, args.num_gpus, num_machines=1, dist_url=args.dist_url, args=(args,))\n")
    assert style_of(detectron2, ["--num-gpus", "2"]) == (
        "spawn", "the script calls detectron2's launch() (line 3) for more than one GPU: detectron2 starts the "
                 "ranks itself")
    assert style_of(detectron2, ["--num-gpus", "1"]) is None
    assert style_of("import runpy, sys\nsys.argv = ['torchrun', '--nproc-per-node', '2', 'w.py']\n"
                    "runpy.run_module('torch.distributed.run', run_name='__main__', alter_sys=True)\n") == (
        "spawn", "the script runs torch.distributed.run itself (line 3): it starts its own ranks")


def test_a_parser_read_from_a_calls_result_is_read_whole():
    """``default_argument_parser().parse_args()`` (detectron2's tools): the args template follows the options the
    parser in the file declares; the call on a call's result was not seen, and the whole template was appended
    ("unrecognized arguments: --dist-backend")."""
    source = ("import argparse\ndef default_argument_parser():\n    p = argparse.ArgumentParser()\n"
              "    p.add_argument('--num-gpus', type=int, default=1)\n    p.add_argument('--dist-url', default='auto')\n"
              "    return p\nargs = default_argument_parser().parse_args()\n")
    fitted = fit_template(DEFAULT_DIST_ARGS, parse_script(source))
    assert fitted.template == "--dist-url {url}", fitted


@pytest.mark.slow
def test_a_project_tool_whose_launcher_is_in_its_package_trains_once_in_spawn_style(tmp_path):
    home = tmp_path / "home"
    res = ddpstudio("run", "--json", "--script", str(PROJECT_TOOL), "--", "--num-gpus", "2", "--steps", "4",
                    env={**os.environ, "DDPSTUDIO_HOME": str(home)})
    assert not processes_of(home), "a process of the run was left running"
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    assert "script style spawn: the script calls launch() (line 33), which starts processes itself" in res.stderr
    evs = events(res.stdout)
    assert final(evs).get("state") == protocol.FINISHED and final(evs).get("world_size") == 2
    for rank in (0, 1):
        assert [e.get("step") for e in of_type(evs, protocol.STEP) if e.rank == rank] == [1, 2, 3, 4]
    assert [(e.get("step"), e.get("ranks")) for e in of_type(evs, protocol.GLOBAL_STEP)] == [(s, 2) for s in range(1, 5)]
