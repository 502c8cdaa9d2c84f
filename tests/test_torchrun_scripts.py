"""A script written for torchrun runs as written: ``ddpstudio run --script train.py -- 3 1`` and nothing else.

The DDP tutorial series' ``multigpu_torchrun.py`` (and nanoGPT, and most scripts written since torchrun)
takes its rank from ``LOCAL_RANK`` and joins by ``env://``. Started in args style it got ``--dist-url ...``
appended and its argparse stopped it ("unrecognized arguments"); a user had to know to pick
``--script-style env``. The style is now read from the script (core/envstyle.py), said with its reason, and
the script's hard-coded NCCL becomes Gloo on a machine without GPUs as it does on Windows (rank/ncclswap.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.scriptstyle import read_source, suggest_style
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

SCRIPT = SCRIPTS / "tutorial_series_torchrun.py"
READS_LOCAL_RANK = ("the script reads LOCAL_RANK from its environment (line 24): it is written for torchrun, "
                    "which sets it")
NO_GPU = "this script asks for NCCL, which needs CUDA GPUs, and this run has none: Gloo is used instead"


def style(source: str, *args: str):
    found = suggest_style(source, list(args))
    return (found.style, found.why) if found else None


# -- what the detector reads ----------------------------------------------------------------------------
def test_a_script_that_reads_torchrun_variables_is_env_style_and_says_where():
    assert style(read_source(SCRIPT)) == ("env", READS_LOCAL_RANK)
    nanogpt = "import os\nddp = int(os.environ.get('RANK', -1)) != -1\nif ddp:\n    init_process_group(backend)\n"
    assert style(nanogpt) == ("env", "the script reads RANK from its environment (line 2): it is written for "
                                     "torchrun, which sets it")
    assert style("import os\nif 'LOCAL_RANK' in os.environ:\n    pass\n")[0] == "env"
    assert style("import os\nn = os.getenv('WORLD_SIZE', '1')\n")[0] == "env"
    assert style("from os import getenv, environ\nr = environ['LOCAL_RANK']\n")[0] == "env"


def test_a_process_group_joined_by_env_is_env_style_and_one_joined_otherwise_is_not():
    assert style("import torch.distributed as dist\ndist.init_process_group('gloo')\n") == (
        "env", "the script calls dist.init_process_group() without an init_method (line 2): it joins through "
               "the environment variables torchrun sets (env://, the default)")
    assert style("from torch.distributed import init_process_group\n"
                 "init_process_group(backend='nccl', init_method='env://')\n")[0] == "env"
    for joined_otherwise in ("dist.init_process_group('gloo', 'tcp://127.0.0.1:23456', rank=r, world_size=2)",
                             "dist.init_process_group('gloo', init_method=args.url, rank=r, world_size=2)",
                             "dist.init_process_group('gloo', store=store, rank=r, world_size=2)",
                             "dist.init_process_group(**settings)"):
        assert style(f"import torch.distributed as dist\n{joined_otherwise}\n") is None, joined_otherwise


def test_a_script_built_on_a_library_that_reads_torchruns_variables_is_env_style():
    accelerate = "import argparse\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"
    assert style(accelerate) == ("env", "the script imports accelerate (line 2): its distributed set-up reads the "
                                        "variables torchrun sets")
    for source in ("import lightning as L\n", "import pytorch_lightning\n", "from transformers import Trainer\n",
                   "import deepspeed\n", "from lightning.pytorch import Trainer\n"):
        assert style(source)[0] == "env", source
    # The script's own reading of a variable is the reason given, whatever it imports before it.
    both = "import transformers\nimport os\nrank = int(os.environ['LOCAL_RANK'])\n"
    assert style(both)[1].startswith("the script reads LOCAL_RANK from its environment (line 3)")
    assert style("from .accelerate import helper\nimport torchvision\n") is None  # a module of its own


def test_what_does_not_make_a_script_env_style():
    # It sets the variables itself (written, not read); a plain script; another variable.
    assert style("import os\nos.environ['MASTER_ADDR'] = 'localhost'\n") is None
    assert style("print('hello')\n") is None
    assert style("import os\nhome = os.environ['HOME']\n") is None
    # It parses the args template's own options: args style fits it, whatever else it reads (ImageNet's main.py
    # reads WORLD_SIZE when --dist-url is env://).
    imagenet = ("import argparse, os\np = argparse.ArgumentParser()\np.add_argument('--dist-url', default='env://')\n"
                "p.add_argument('--world-size', type=int, default=-1)\nargs = p.parse_args()\n"
                "if args.dist_url == 'env://': args.world_size = int(os.environ['WORLD_SIZE'])\n")
    assert style(imagenet) is None
    # Spawning wins: the DDP tutorial sets MASTER_ADDR and calls init_process_group without an init_method.
    tutorial = ("import os\nimport torch.multiprocessing as mp\nimport torch.distributed as dist\n"
                "def run(rank):\n    dist.init_process_group('gloo', rank=rank, world_size=2)\n"
                "mp.spawn(run, nprocs=2)\n")
    assert style(tutorial)[0] == "spawn"


def test_a_parser_without_the_templates_options_is_env_style_and_says_why():
    """Args style would append options such a parser refuses before any training; torchrun's variables cost a
    script that does not read them nothing. timm's train.py takes --local_rank and leaves its set-up to
    timm.utils.init_distributed_device, which reads RANK and WORLD_SIZE in another module."""
    timm_like = ("import argparse\nfrom timm import utils\np = argparse.ArgumentParser()\n"
                 "p.add_argument('--data-dir')\np.add_argument('--local_rank', default=0, type=int)\n"
                 "args = p.parse_args()\ndevice = utils.init_distributed_device(args)\n")
    assert style(timm_like) == ("env", "the script takes --local_rank, the option torch.distributed.launch gave each "
                                       "rank beside torchrun's environment variables, and none of the args "
                                       "template's (--dist-url, --dist-backend, --world-size, --rank): each rank "
                                       "gets both")
    own_options = ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--epochs', type=int)\n"
                   "args = p.parse_args()\n")
    assert style(own_options) == ("env", "the script's argument parser takes none of the args template's options "
                                         "(--dist-url, --dist-backend, --world-size, --rank) and would refuse them: "
                                         "each rank gets torchrun's environment variables instead")
    positional = "import argparse\np = argparse.ArgumentParser()\np.add_argument('data')\na = p.parse_args()\n"
    assert style(positional)[0] == "env"
    # Where the parser is not all in the file, or an option is declared from a variable, it may take the
    # template's options after all: args style, as before (a loop over the four of them, a test's own script).
    assert style(own_options.replace("parse_args()", "parse_known_args()")) is None
    assert style(own_options.replace("ArgumentParser()", "ArgumentParser(parents=[base])")) is None
    looped = ("import argparse\np = argparse.ArgumentParser()\n"
              "for n in ('--dist-url', '--dist-backend', '--world-size', '--rank'): p.add_argument(n)\n"
              "a = p.parse_args()\n")
    assert style(looped) is None
    assert style("from config import parse_args\nargs = parse_args()\n") is None  # its parser is elsewhere
    assert style(looped.replace("p.add_argument(n)", "p.add_argument(n)\np.add_argument('--local_rank')")) is None
    # One of the template's options in either spelling: args style (no suggestion), as before.
    for option in ("--dist-url", "--dist_backend", "--world-size", "--rank"):
        assert style(own_options + f"p.add_argument('{option}')\n") is None, option
    assert style(own_options, "--multiprocessing-distributed")[0] == "spawn"  # spawning still comes first
    assert style("import sys\ndata = sys.argv[1]\n") is None  # no parser: nothing refuses the template


def test_the_cli_keeps_args_style_when_a_template_is_given(capsys, tmp_path):
    from ddpstudio.cli.run import chosen_style

    assert chosen_style(str(SCRIPT), ["3", "1"]) == "env"
    assert capsys.readouterr().err == (f"ddpstudio: script style env: {READS_LOCAL_RANK} (--script-style args or "
                                       "spawn overrides)\n")
    assert chosen_style(str(SCRIPT), ["3", "1"], template_given=True) == "args"  # a template is for args style
    assert capsys.readouterr().err == ("ddpstudio: script style args: a --dist-args template was given: each rank "
                                       "gets it appended (--script-style spawn or env overrides)\n")
    # No suggestion: args style, said with its reason as the other styles are.
    takes_them = tmp_path / "takes_them.py"
    takes_them.write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--dist-url')\n"
                          "p.add_argument('--rank', type=int)\n", encoding="utf-8")
    assert chosen_style(str(takes_them), []) == "args"
    assert capsys.readouterr().err == ("ddpstudio: script style args: the script takes the args template's "
                                       "--dist-url, --rank: each rank gets the template appended (--script-style "
                                       "spawn or env overrides)\n")
    plain = tmp_path / "plain.py"
    plain.write_text("import sys\nprint(sys.argv)\n", encoding="utf-8")
    assert chosen_style(str(plain), []) == "args"
    assert "nothing in the script says torchrun or that it starts its own ranks" in capsys.readouterr().err


def test_a_script_written_for_torch_distributed_launch_takes_its_local_rank_option_too():
    from ddpstudio.core import envstyle
    from ddpstudio.core.scriptargs import parse_script

    def local_rank_option(source):
        return envstyle.local_rank_option(parse_script(source))

    launch = read_source(SCRIPTS / "launch_local_rank.py")
    assert local_rank_option(launch) == "--local_rank"
    assert style(launch) == ("env", "the script reads RANK from its environment (line 18): it is written for "
                                    "torchrun, which sets it; it takes --local_rank, which each rank gets as "
                                    "torch.distributed.launch gave it")
    both = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--local-rank', '--local_rank', type=int)\n"
    assert local_rank_option(both) == "--local-rank"  # torch 2's spelling first, where the script takes both
    assert local_rank_option("import argparse\np = argparse.ArgumentParser()\np.add_argument('--rank')\n") is None
    assert local_rank_option(read_source(SCRIPT)) is None and local_rank_option("def broken(:\n") is None


def test_the_cli_prints_a_warning_once_not_again_as_the_rank_helpers_line():
    import io

    from ddpstudio.cli.progress import ProgressView

    out = io.StringIO()
    view = ProgressView(out=out, tty=False)
    view.feed(protocol.make_event(protocol.RUN_STARTED, run_id="r", world_size=2, backend="gloo", device="cpu",
                                  store="tcp", run_dir="/r", kind="script", script_style="env"))
    view.feed(protocol.make_event(protocol.WARNING, rank=0, message=NO_GPU))
    for line in (f"ddpstudio rank helper: {NO_GPU}", "ddpstudio rank helper: something else", "epoch 0"):
        view.feed(protocol.make_event(protocol.LOG, rank=0, stream="stderr", line=line))
    shown = out.getvalue().splitlines()
    assert shown[-3:] == [f"warning: {NO_GPU}", "ddpstudio rank helper: something else", "epoch 0"]


# -- the real run ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_tutorial_series_script_trains_as_written_and_saves_its_snapshot_where_it_was_started(studio_home,
                                                                                                 tmp_path):
    res = ddpstudio("run", "--json", "--script", str(SCRIPT), "--world-size", "2", "--", "2", "1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    assert f"script style env: {READS_LOCAL_RANK}" in res.stderr
    evs = events(res.stdout)
    assert of_type(evs, protocol.RUN_STARTED)[0].get("script_style") == "env"
    joined = of_type(evs, protocol.RANK_JOINED)
    assert sorted((e.rank, e.get("backend"), e.get("asked_backend")) for e in joined) == [
        (0, "gloo", "nccl"), (1, "gloo", "nccl")]
    from ddpstudio.core.platform import current

    no_nccl = NO_GPU.replace("needs CUDA GPUs, and this run has none", "Windows builds of PyTorch do not have") \
        if current().is_windows else NO_GPU  # the windows-latest workflow runs it too
    assert [w.get("message") for w in of_type(evs, protocol.WARNING)] == [no_nccl]
    lines = [e.get("line") for e in of_type(evs, protocol.LOG)]
    for rank in (0, 1):
        assert any(line.startswith(f"[GPU{rank}] Epoch 1 | Batchsize: 32 | Steps: 4 | loss ") for line in lines)
    assert "Epoch 1 | Training snapshot saved at snapshot.pt" in lines
    assert final(evs).get("state") == protocol.FINISHED
    import torch

    saved = torch.load(tmp_path / "snapshot.pt")  # rank 0 saved it where the script was started
    assert saved["EPOCHS_RUN"] == 2 and set(saved["MODEL_STATE"]) == {"weight", "bias"}
    # The plan keeps that folder, so the run opened again in the window runs there too (not in the script's).
    from ddpstudio.core.plan import Plan
    from ddpstudio.gui.form_state import from_plan

    plan = Plan.read(Path(of_type(evs, protocol.RUN_STARTED)[0].get("run_dir")) / "plan.json")
    assert os.path.samefile(plan.script.cwd, tmp_path)  # as the CLI read it (Windows may spell it shorter)
    assert from_plan(plan).script_cwd == plan.script.cwd  # not the script's folder: shown, and kept


@pytest.mark.slow
def test_forced_into_args_style_it_fails_at_once_with_the_hint_that_names_the_style(studio_home, tmp_path):
    """With the default template, forced args style now leaves out the options the script's parser (all in the
    file) does not take, and says so (core/argsfit.py); a template typed by the user is used as typed, and
    the script's argparse refuses it at once: the hint names env style."""
    from ddpstudio.core.hints import hints_for

    res = ddpstudio("run", "--json", "--script", str(SCRIPT), "--script-style", "args", "--world-size", "2",
                    "--dist-args", "--dist-url {url} --rank {rank}", "--", "2", "1", cwd=tmp_path)
    done = final(events(res.stdout))
    assert res.returncode == 1 and done.get("state") == protocol.FAILED, res.stderr[-3000:]
    assert "error: unrecognized arguments: --dist-url" in done.get("summary")
    [hint] = hints_for(done.get("summary"))
    assert hint.key == "dist_args" and "--script-style env" in hint.text
    assert not (tmp_path / "snapshot.pt").exists()


@pytest.mark.slow
def test_a_torch_distributed_launch_script_gets_its_required_local_rank_and_trains(studio_home, tmp_path):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "launch_local_rank.py"), "--world-size", "2",
                    cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    evs = events(res.stdout)
    started = of_type(evs, protocol.RUN_STARTED)[0]
    assert started.get("script_style") == "env"
    assert ("each rank also gets --local_rank=N (its rank on this machine): the script takes that option, which "
            "torch.distributed.launch gave it") in started.get("reasons")
    commands = {e.rank: e.get("command") for e in of_type(evs, protocol.RANK_STARTED)}
    assert commands[0][-1] == "--local_rank=0" and commands[1][-1] == "--local_rank=1"
    lines = [e.get("line") for e in of_type(evs, protocol.LOG)]
    for rank in (0, 1):
        assert f"rank {rank} local_rank {rank} env LOCAL_RANK {rank}" in lines
    assert final(evs).get("state") == protocol.FINISHED


@pytest.mark.slow
def test_a_timm_shaped_script_runs_in_env_style_by_default_and_each_evaluation_pass_is_one_point(studio_home,
                                                                                                 tmp_path):
    """timm's train.py (helper trial, 2026-12-07): --local_rank, its set-up in a module of its own, and validation
    printed batch by batch. It used to start in args style (exit 1: "unrecognized arguments: --dist-url ...") and,
    in env style, gave each validation batch's own loss as an evaluation of its own."""
    script = SCRIPTS / "timm_like" / "train.py"
    res = ddpstudio("run", "--json", "--script", str(script), "--world-size", "2", "--", "--out", str(tmp_path),
                    cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    assert "ddpstudio: script style env: the script takes --local_rank, the option torch.distributed.launch" \
        in res.stderr
    evs = events(res.stdout)
    assert final(evs).get("state") == protocol.FINISHED
    for rank in (0, 1):
        expected = json.loads((tmp_path / f"rank{rank}.json").read_text(encoding="utf-8"))
        evals = [e for e in of_type(evs, protocol.EVAL) if e.rank == rank]
        assert [e.get("step") for e in evals] == [4, 8]  # one per pass, after each epoch's 4 steps
        assert [e.get("loss") for e in evals] == pytest.approx(expected, abs=1e-4)  # the last line's average
        assert [e.get("step") for e in of_type(evs, protocol.STEP) if e.rank == rank] == list(range(1, 9))


def test_an_accelerate_script_on_the_cpu_is_told_to_use_it_so_its_ranks_train_together(tmp_path, monkeypatch):
    """Accelerate 1.x on a machine without GPUs: with LOCAL_RANK set it finds no distributed type unless told to use
    the CPU, so each rank trained alone (num_processes 1; seen under DDP Studio and torchrun alike, 2026-12-07),
    although the ranks joined a process group and the run "finished". DDP Studio tells it, and says so."""
    from ddpstudio.core.gpu import FakeGpuSource, detect_inventory
    from ddpstudio.core.plan import ScriptSpec
    from ddpstudio.core.platform import LINUX, WINDOWS
    from ddpstudio.core.policy import ACCELERATE_CPU, Request, build_plan
    from ddpstudio.core.launch.commands import rank_env

    script = tmp_path / "acc.py"
    script.write_text("from accelerate import Accelerator\naccelerator = Accelerator()\n", encoding="utf-8")
    monkeypatch.delenv(ACCELERATE_CPU, raising=False)
    cpu = detect_inventory()
    gpus = detect_inventory(FakeGpuSource([{"name": "NVIDIA GeForce RTX 4090", "total_memory_mb": 24564,
                                            "compute_capability": "8.9"}] * 2))
    request = Request(script=ScriptSpec(path=str(script), style="env"), store="tcp", port=29511)
    for platform in (LINUX, WINDOWS):
        plan = build_plan(request, platform, cpu, interfaces={})
        assert plan.device == "cpu" and rank_env(plan, 1, "/events", base={})[ACCELERATE_CPU] == "1"
        assert (f"{ACCELERATE_CPU}=1 for every rank: the script uses Accelerate, which joins the ranks on a machine "
                "without GPUs only when told to use the CPU (each rank would train alone)") in plan.reasons
    assert ACCELERATE_CPU not in build_plan(request, LINUX, gpus, interfaces={}).env  # on GPUs it joins them
    monkeypatch.setenv(ACCELERATE_CPU, "0")  # the user's own choice stays
    assert ACCELERATE_CPU not in build_plan(request, LINUX, cpu, interfaces={}).env
    monkeypatch.delenv(ACCELERATE_CPU)
    script.write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\n", encoding="utf-8")
    assert ACCELERATE_CPU not in build_plan(request, LINUX, cpu, interfaces={}).env  # not an Accelerate script
    # Transformers' Trainer builds Accelerate's state itself (training_args.py _setup_devices: cpu only with
    # --use_cpu or ACCELERATE_USE_CPU): without either each rank trained alone, world_size 1 (2026-12-08, a
    # Trainer script with HfArgumentParser, under torchrun and DDP Studio alike)
    script.write_text("from transformers import HfArgumentParser, Trainer, TrainingArguments\n", encoding="utf-8")
    plan = build_plan(request, LINUX, cpu, interfaces={})
    assert plan.env[ACCELERATE_CPU] == "1" and (
        f"{ACCELERATE_CPU}=1 for every rank: the script uses Transformers' Trainer (built on Accelerate), which joins "
        "the ranks on a machine without GPUs only when told to use the CPU (each rank would train alone)") in plan.reasons
