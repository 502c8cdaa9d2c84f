"""The plan says what a user's script's batch size becomes with the ranks (core/scriptbatch.py).

Each DDP rank loads its own batch, so ``--batch-size 32`` on two ranks is an effective batch of 64: the
trap the brief names ("the effective batch size silently changes with the number of GPUs"), unless the
script divides the option by its rank count as PyTorch's ImageNet example does. Read from the source and the
user's arguments; nothing runs.
"""

from __future__ import annotations

from pathlib import Path

from ddpstudio.core.scriptargs import parse_script
from ddpstudio.core.scriptbatch import script_batch_reason
from ddpstudio.core.scriptstyle import read_source
from tests.studio import SCRIPTS

SERIES = parse_script(read_source(SCRIPTS / "tutorial_series_torchrun.py"))
IMAGENET = parse_script("""import argparse
parser = argparse.ArgumentParser()
parser.add_argument('-b', '--batch-size', default=256, type=int, metavar='N')
def main_worker(gpu, ngpus_per_node, args):
    if args.distributed:
        if args.gpu is not None:
            args.batch_size = int(args.batch_size / ngpus_per_node)
""")


def test_a_per_rank_batch_grows_with_the_ranks_and_the_plan_says_by_how_much():
    assert script_batch_reason(SERIES, ["3", "1"], 2) == (
        "effective batch 64 = 2 ranks x 32 (--batch_size 32, the script's default): each rank takes its own batch, "
        "so it grows with the ranks; to keep one rank's 32, give --batch_size 16")
    assert script_batch_reason(SERIES, ["3", "1", "--batch_size", "50"], 4) == (
        "effective batch 200 = 4 ranks x 50 (--batch_size 50, given): each rank takes its own batch, so it grows "
        "with the ranks; to keep one rank's 50, give about --batch_size 12")
    assert script_batch_reason(SERIES, ["3", "1"], 1) is None  # one rank: nothing changes
    assert script_batch_reason(SERIES, [], None).startswith(  # spawn style: the script decides how many ranks
        "each rank the script starts takes its own batch (--batch_size 32, the script's default): the effective "
        "batch is 32 x the number of ranks")


def test_a_script_that_divides_its_batch_by_the_ranks_keeps_it():
    assert script_batch_reason(IMAGENET, ["-b", "512"], 2) == (
        "the script divides --batch-size by a number of ranks (line 7), so its effective batch stays about 512 "
        "(--batch-size 512, given) as the ranks change")
    for divides in ("args.batch_size //= dist.get_world_size()", "per_rank = args.batch_size // world_size",
                    "bs = args.batch_size / torch.cuda.device_count()"):
        source = ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--batch-size', type=int, "
                  f"default=64)\nargs = p.parse_args()\n{divides}\n")
        assert script_batch_reason(parse_script(source), [], 2).startswith("the script divides --batch-size"), divides


def test_a_script_that_hands_its_batch_to_ignites_auto_dataloader_keeps_it():
    """idist.auto_dataloader divides batch_size by the world size (helper trial: the plan told an Ignite user to
    give half the batch, which would have made it a quarter)."""
    import ignite.distributed.auto as ignite_auto

    assert 'kwargs["batch_size"] //= world_size' in Path(ignite_auto.__file__).read_text(encoding="utf-8")
    ignite = parse_script(read_source(SCRIPTS / "ignite_parallel.py"))
    assert script_batch_reason(ignite, ["--backend", "gloo"], 2) == (
        "the script hands its batch size to Ignite's idist.auto_dataloader (line 21), which divides it by the "
        "number of ranks, so its effective batch stays about 32 (--batch_size 32, the script's default) as the "
        "ranks change")


def test_no_line_where_the_batch_cannot_be_read():
    half = ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--batch-size', type=int, default=64)\n"
            "args = p.parse_args()\nhalf = args.batch_size // 2\n")
    assert script_batch_reason(parse_script(half), [], 2).startswith("effective batch 128 = 2 ranks x 64")  # not the split
    computed = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--batch-size', type=int, default=B)\n"
    assert script_batch_reason(parse_script(computed), [], 2) is None  # a default that is not a literal
    assert script_batch_reason(parse_script("print('no parser')\n"), [], 2) is None
    assert script_batch_reason(None, [], 2) is None
    assert script_batch_reason(SERIES, ["--batch_size", "many"], 2) is None  # argparse would refuse it: its own words


def test_the_plan_of_a_script_carries_the_line(studio_home):
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.plan import ScriptSpec
    from ddpstudio.core.platform import LINUX
    from ddpstudio.core.policy import Request, build_plan

    spec = ScriptSpec(path=str(SCRIPTS / "tutorial_series_torchrun.py"), args=["3", "1"], style="env")
    plan = build_plan(Request(script=spec, world_size=2), LINUX, detect_inventory(), interfaces={})
    assert script_batch_reason(SERIES, ["3", "1"], 2) in plan.reasons
