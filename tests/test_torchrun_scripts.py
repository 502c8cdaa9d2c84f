"""A script written for torchrun runs as written: ``ddpstudio run --script train.py -- 3 1`` and nothing else.

The DDP tutorial series' ``multigpu_torchrun.py`` (and nanoGPT, and most scripts written since torchrun)
takes its rank from ``LOCAL_RANK`` and joins by ``env://``. Started in args style it got ``--dist-url ...``
appended and its argparse stopped it ("unrecognized arguments"); a user had to know to pick
``--script-style env``. The style is now read from the script (core/envstyle.py), said with its reason, and
the script's hard-coded NCCL becomes Gloo on a machine without GPUs as it does on Windows (rank/ncclswap.py).
"""

from __future__ import annotations

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


def test_the_cli_keeps_args_style_when_a_template_is_given(capsys):
    from ddpstudio.cli.run import chosen_style

    assert chosen_style(str(SCRIPT), ["3", "1"]) == "env"
    assert capsys.readouterr().err == (f"ddpstudio: script style env: {READS_LOCAL_RANK} (--script-style args or "
                                       "spawn overrides)\n")
    assert chosen_style(str(SCRIPT), ["3", "1"], template_given=True) == "args"  # a template is for args style
    assert capsys.readouterr().err == ""


# -- the real run ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_tutorial_series_script_trains_as_written_and_resumes_from_its_own_snapshot(studio_home, tmp_path):
    res = ddpstudio("run", "--json", "--script", str(SCRIPT), "--world-size", "2", "--", "2", "1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    assert f"script style env: {READS_LOCAL_RANK}" in res.stderr
    evs = events(res.stdout)
    assert of_type(evs, protocol.RUN_STARTED)[0].get("script_style") == "env"
    joined = of_type(evs, protocol.RANK_JOINED)
    assert sorted((e.rank, e.get("backend"), e.get("asked_backend")) for e in joined) == [
        (0, "gloo", "nccl"), (1, "gloo", "nccl")]
    assert [w.get("message") for w in of_type(evs, protocol.WARNING)] == [NO_GPU]
    lines = [e.get("line") for e in of_type(evs, protocol.LOG)]
    for rank in (0, 1):
        assert f"[GPU{rank}] Epoch 1 | Batchsize: 32 | Steps: 4" in " ".join(lines)  # 256 samples over 2 ranks
    assert final(evs).get("state") == protocol.FINISHED
    assert (tmp_path / "snapshot.pt").is_file()  # rank 0 saved it where the script was started

    again = ddpstudio("run", "--json", "--script", str(SCRIPT), "--world-size", "2", "--", "3", "1", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:] + again.stdout[-3000:]
    lines = [e.get("line") for e in of_type(events(again.stdout), protocol.LOG)]
    assert lines.count("Resuming training from snapshot at Epoch 2") == 2  # each rank
    assert any(line.startswith("[GPU0] Epoch 2 ") for line in lines)
    assert not any(line.startswith("[GPU0] Epoch 1 ") for line in lines)


@pytest.mark.slow
def test_forced_into_args_style_it_fails_at_once_with_the_hint_that_names_the_style(studio_home, tmp_path):
    from ddpstudio.gui.hints import hints_for

    res = ddpstudio("run", "--json", "--script", str(SCRIPT), "--script-style", "args", "--world-size", "2", "--",
                    "2", "1", cwd=tmp_path)
    done = final(events(res.stdout))
    assert res.returncode == 1 and done.get("state") == protocol.FAILED, res.stderr[-3000:]
    assert "error: unrecognized arguments: --dist-url" in done.get("summary")
    [hint] = hints_for(done.get("summary"))
    assert hint.key == "dist_args" and "--script-style env" in hint.text
    assert not (tmp_path / "snapshot.pt").exists()
