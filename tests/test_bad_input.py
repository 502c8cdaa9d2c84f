"""Bad input: one clear message, a non-zero exit, and nothing left behind."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from ddpstudio.core import protocol
from tests.conftest import processes_of
from tests.studio import SCRIPTS, TINY, ddpstudio, events, final

BAD_INPUT = 2


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ddpstudio: error:")]


def assert_rejected(res, *words: str) -> str:
    assert res.returncode == BAD_INPUT, res.stdout + res.stderr
    lines = error_lines(res.stderr)
    assert len(lines) == 1, res.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert res.stdout == ""
    return lines[0]


def assert_nothing_started(home):
    assert not processes_of(home)
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_missing_script(studio_home):
    assert_rejected(ddpstudio("run", "--script", "no/such/train.py"), "does not exist", "no/such/train.py")
    assert_nothing_started(studio_home)


def test_a_script_named_first_is_the_script_and_other_words_say_how_to_give_one(studio_home, tmp_path):
    """Helper trial of 2026-12-08: ``ddpstudio run train.py --world-size 2 -- --max_iters=2`` (as python and
    torchrun take it) printed the top-level usage and "unrecognized arguments: -- --max_iters=2"."""
    from ddpstudio.cli.main import _parser
    from ddpstudio.cli.run import positional_script

    args, extra = _parser().parse_known_args(["run", "train.py", "--world-size", "2", "--", "--max_iters=2"])
    assert extra == ["--", "--max_iters=2"]  # what cli/main.py hands on to the script
    args.script_args += extra[1:]
    assert positional_script(args) is None and (args.script, args.script_args) == ("train.py", ["--max_iters=2"])
    # a missing one: the one error of --script's, and no style line read from a file that is not there
    res = ddpstudio("run", str(tmp_path / "train.py"), "--world-size", "2", "--", "--max_iters=2")
    assert_rejected(res, "does not exist", "train.py")
    assert "script style" not in res.stderr
    assert_rejected(ddpstudio("run", "imagenet", "--world-size", "2"), "unexpected arguments 'imagenet'",
                    "a script is given with --script")
    # the script's own options before "--" are not DDP Studio's
    assert_rejected(ddpstudio("run", "train.py", "--max_iters=2"), "unrecognized arguments: --max_iters=2",
                    "a script's own arguments go after --")
    assert_nothing_started(studio_home)


def test_a_reader_that_closed_the_pipe_gets_no_traceback(studio_home):
    """``ddpstudio runs --json | head`` (helper trial 2026-12-08): the reader gone, the command ended with a
    BrokenPipeError traceback. It ends with exit 1 and nothing on stderr."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        res = subprocess.run([sys.executable, "-m", "ddpstudio", "runs", "--json"], stdout=write,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, timeout=120)
    finally:
        os.close(write)
    assert (res.returncode, res.stderr) == (1, "")


def test_missing_data_directory(studio_home, tmp_path):
    assert_rejected(ddpstudio("run", "--data", str(tmp_path / "nope")), "does not exist")
    assert_nothing_started(studio_home)


def test_empty_data_directory(studio_home, tmp_path):
    assert_rejected(ddpstudio("run", "--data", str(tmp_path)), "is empty", "one sub-folder of images per class")
    (tmp_path / "cats").mkdir()
    (tmp_path / "cats" / "readme.txt").write_text("no images")
    assert_rejected(ddpstudio("run", "--data", str(tmp_path)), "no images found")
    assert_nothing_started(studio_home)


def test_cifar_folder_without_the_batches(studio_home, tmp_path):
    assert_rejected(ddpstudio("run", "--dataset", "cifar10", "--data", str(tmp_path)), "cifar-10-batches-py")


@pytest.mark.parametrize("flag, what", [("--checkpoint-dir", "checkpoint folder"), ("--store-path", "store folder")])
@pytest.mark.posix_only("/proc refuses new files on Linux only")
def test_unwritable_folders(studio_home, tmp_path, flag, what):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    # A folder below a regular file can never be created (even by root, unlike chmod).
    target = blocker / "sub" / ("pg" if flag == "--store-path" else "")
    assert_rejected(ddpstudio("run", flag, str(target)), what, "not a folder")
    # /proc refuses new files for everyone.
    assert_rejected(ddpstudio("run", flag, "/proc/ddpstudio-test/pg"), what)
    assert_nothing_started(studio_home)
    assert not (tmp_path / "a-file").is_dir()


def test_port_in_use(studio_home):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        line = assert_rejected(ddpstudio("run", "--store", "tcp", "--port", str(port)), f"port {port}",
                               "already in use")
        assert "choose another port" in line
    assert_nothing_started(studio_home)


def test_world_size_zero(studio_home):
    assert_rejected(ddpstudio("run", "--world-size", "0"), "world size must be at least 1")
    assert_nothing_started(studio_home)


@pytest.mark.slow
def test_world_size_above_the_gpu_count(studio_home, tmp_path, monkeypatch):
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps({"gpus": [{"name": "NVIDIA RTX A4000", "total_memory_mb": 16376}] * 2}))
    monkeypatch.setenv("DDPSTUDIO_FAKE_GPUS", str(gpus))
    assert_rejected(ddpstudio("run", "--world-size", "3"), "asked for 3 ranks but this machine has 2 GPUs")
    assert_rejected(ddpstudio("run", "--backend", "nccl", "--world-size", "3"), "3 ranks", "2 GPUs")
    assert_nothing_started(studio_home)


def test_unknown_model(studio_home):
    assert_rejected(ddpstudio("run", "--model", "resnet9000"), "unknown model 'resnet9000'", "resnet50")
    assert_nothing_started(studio_home)


def test_resume_without_a_checkpoint(studio_home, tmp_path):
    assert_rejected(ddpstudio("run", "--resume", "--checkpoint-dir", str(tmp_path)), "no checkpoint.pt")


@pytest.mark.slow
def test_script_that_crashes_on_import(studio_home, tmp_path):
    ckpt = tmp_path / "ckpt"
    # One rank (each rank costs ~6 s of CPU to start): the test reads the message, not how ranks' failures rank.
    res = ddpstudio("run", "--json", "--world-size", "1", "--script", str(SCRIPTS / "crash_on_import.py"),
                    *TINY[-2:])
    assert res.returncode == 1
    done = final(events(res.stdout))
    assert done.get("state") == protocol.FAILED
    assert done.get("root_cause")["message"] == "ModuleNotFoundError: No module named 'a_module_that_does_not_exist'"
    from ddpstudio.core.hints import hints_for  # the window's hint: which Python, and the line that installs it

    [hint] = hints_for(done.get("summary"), done.get("root_cause")["message"])
    assert hint.key == "missing_module" and "-m pip install a_module_that_does_not_exist" in hint.text
    assert not processes_of(studio_home)
    assert not ckpt.exists()
    # On a terminal the same failure reads as one root-cause line.
    human = ddpstudio("run", "--world-size", "1", "--script", str(SCRIPTS / "crash_on_import.py"))
    assert human.returncode == 1
    assert "root cause: rank" in human.stdout and "No module named 'a_module_that_does_not_exist'" in human.stdout
    # ... and what to do, as the window's error panel says it: the line that installs the module.
    [todo] = [line for line in human.stdout.splitlines() if line.startswith("what to do: ")]
    assert "The script needs a_module_that_does_not_exist, which DDP Studio's Python does not have" in todo
    assert human.stdout.index(todo) < human.stdout.index("logs: ")
    assert "-m pip install a_module_that_does_not_exist" in human.stdout


@pytest.mark.parametrize("args, words", [
    (("--grad-exchange", "gpu"), ("unknown gradient exchange 'gpu'", "auto, native, staged")),
    (("--grad-compression", "int8"), ("unknown gradient compression 'int8'", "none or fp16")),
])
@pytest.mark.parametrize("command", ["run", pytest.param("bench", marks=pytest.mark.slow)])  # bench asks torch first
def test_unknown_exchange_values(studio_home, command, args, words):
    assert_rejected(ddpstudio(command, *args), *words)
    assert_nothing_started(studio_home)
# -- inputs that passed validation but could never work (issue 14, section 5) --------------------

def _a_file(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("not a folder")
    return str(path)


UNWORKABLE = [
    (["--lr", "nan"], ["learning rate must be a positive number", "nan"]),
    (["--lr", "inf"], ["learning rate must be a positive number", "inf"]),
    (["--lr", "-0.1"], ["learning rate must be a positive number", "-0.1"]),
    (["--image-size", "0"], ["image size must be at least 1"]),
    (["--model", "alexnet", "--image-size", "32"], ["alexnet cannot take 32x32 images",
                                                    "the smallest size that works is 63"]),
    (["--model", "inception_v3", "--image-size", "64"], ["inception_v3 cannot take 64x64",
                                                         "the smallest size that works is 75"]),
    (["--workers", "-1"], ["workers must be 0 or more", "-1"]),
    (["--synthetic-samples", "0"], ["synthetic data holds 1 to 32,256 distinct images per epoch (got 0)",
                                    "default is 4,096"]),
    (["--synthetic-samples", "40000"], ["synthetic data holds 1 to 32,256 distinct images per epoch (got 40,000)",
                                        "more epochs train for longer"]),
    (["--synthetic-samples", "8", "--batch-size", "8", "--world-size", "2"],
     ["synthetic data gives 8 training samples, too few for one step of 2 ranks x batch 8", "at most 4 per rank",
      "or more --synthetic-samples"]),
    (["--synthetic-samples", "64", "--dataset", "cifar10"], ["--synthetic-samples sizes the made-up images",
                                                             "--dataset cifar10 is real data",
                                                             "leave out --synthetic-samples"]),
    (["--rendezvous-timeout", "0"], ["rendezvous timeout must be a positive number"]),
    (["--rendezvous-timeout", "-5"], ["rendezvous timeout must be a positive number", "-5"]),
    (["--rendezvous-timeout", "nan"], ["rendezvous timeout must be a positive number", "nan"]),
    (["--store", "tcp", "--port", "80"], ["port 80 is a privileged port", "1024-65535"]),
    (["--store", "tcp", "--port", "1023"], ["port 1023 is a privileged port"]),
    (["--data", _a_file], ["train.csv is a file, not a folder"]),
    (["--dataset", "cifar10", "--data", _a_file], ["train.csv is a file, not a folder"]),
    (["--store", "tcp", "--store-path", "STORE"], ["store path is for the file store", "tcp store would ignore"]),
    (["--script", "SCRIPT", "--script-style", "env", "--store-path", "STORE"],
     ["store path is for the file store", "env style"]),
    (["--world-size", "1000"], ["1000 ranks on the CPU do not fit", f"{os.cpu_count()} CPU cores",
                                "GiB of free memory", "at most", "--oversubscribe"]),
]


# Sizes of a model not in the warm cache: the CLI imports torchvision and probes the model (seconds).
PROBED = {"alexnet", "inception_v3"}


@pytest.mark.parametrize("args, words", [
    pytest.param(args, words, marks=[pytest.mark.slow] if PROBED & set(map(str, args)) else [])
    for args, words in UNWORKABLE], ids=[" ".join(a if isinstance(a, str) else "FILE" for a in args)
                                         for args, _ in UNWORKABLE])
def test_inputs_that_cannot_work_are_refused_before_anything_starts(studio_home, tmp_path, args, words):
    real = [a(tmp_path) if callable(a) else a for a in args]
    real = [str(tmp_path / "pg") if a == "STORE" else str(SCRIPTS / "env_style.py") if a == "SCRIPT" else a
            for a in real]
    line = assert_rejected(ddpstudio("run", *real), *words)
    assert "in use" not in line
    assert_nothing_started(studio_home)
    assert not (tmp_path / "pg").exists()


def _png(path):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (200, 30, 30)).save(path)


def run_without_reading(folder, *run_args: str) -> subprocess.CompletedProcess:
    """``ddpstudio run RUN_ARGS`` while ``folder`` cannot be read (mode 0; as root, without the two
    capabilities that let root read anything)."""
    command = [sys.executable, "-m", "ddpstudio", "run", *run_args]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root and setpriv (util-linux) is missing: cannot make a folder unreadable")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *command]
    folder.chmod(0)
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    finally:
        folder.chmod(0o755)


@pytest.mark.posix_only("chmod 0 and geteuid: POSIX permissions")
def test_an_unreadable_class_folder_is_named(studio_home, tmp_path):
    _png(tmp_path / "data" / "dogs" / "a.png")
    _png(tmp_path / "data" / "cats" / "b.png")
    res = run_without_reading(tmp_path / "data" / "cats", "--data", str(tmp_path / "data"))
    line = assert_rejected(res, f"class folder {tmp_path / 'data' / 'cats'} cannot be read", "Permission denied")
    assert "no valid file" not in line
    assert_nothing_started(studio_home)


def test_oversubscribe_lets_people_who_know_go_past_the_cpu_limit():
    from ddpstudio.core.capacity import CpuCapacity
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.plan import RecipeSpec
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import PolicyError, Request, build_plan

    small = CpuCapacity(cores=2, available_bytes=3 * 2**30)
    assert small.max_ranks == 3 and small.problem(3) is None
    assert small.problem(4) == (
        "4 ranks on the CPU do not fit this machine: it has 2 CPU cores (room for 4 ranks at 2 per core) and "
        "3.0 GiB of free memory (room for 3 at about 1 GiB each); use a world size of at most 3, or add "
        "--oversubscribe if you know it fits")
    with pytest.raises(PolicyError, match="do not fit this machine"):
        build_plan(Request(world_size=1000, recipe=RecipeSpec()), current(), detect_inventory())
    plan = build_plan(Request(world_size=1000, oversubscribe=True, recipe=RecipeSpec()), current(), detect_inventory())
    assert plan.world_size == 1000 and plan.device == "cpu"


# -- issue 27, second sweep: damage, and inputs silently replaced by something else --------------------------
# DIR is the test's folder (also the command's working folder: a relative path would land there), SCRIPT a
# script in it. Each is refused before anything starts, and the folder holds afterwards what it held before.

SECOND_SWEEP = [
    (["--store-path", "tcp://127.0.0.1:29500"], ["store path tcp://127.0.0.1:29500 is a tcp:// address",
                                                 "--store tcp --port 29500", "leave out the store path"]),
    (["--store-path", "DIR/typo/sub/pg"], ["store folder DIR/typo/sub does not exist", "DIR has no typo",
                                           "never created"]),
    (["--store-path", "file://DIR/typo/pg"], ["store folder DIR/typo does not exist", "DIR has no typo"]),
    (["--store-path", ""], ["--store-path is empty", "unset shell variable"]),
    (["--workers", "10000"], ["10000 DataLoader workers per rank do not fit this machine", "CPU cores",
                              "GiB of free memory", "open files", "use at most", "--oversubscribe"]),
    (["--script", ""], ["--script is empty", "unset shell variable", "path of your training script"]),
    (["--data", ""], ["--data is empty", "the data folder"]),
    (["--demo", "--script", "SCRIPT"], ["--demo", "--script your own script", "give one of them"]),
    (["--demo", "--epochs", "3"], ["--demo stops after 40 steps", "--epochs 3 would never be reached",
                                   "--max-steps"]),
    (["--store", "file", "--port", "20000"], ["port 20000 is for the TCP store", "file store you chose",
                                              "use --store tcp"]),
    (["--port", "20000"], ["port 20000 is for the TCP store", "file store (the default)"]),
    (["--data", "DIR", "--dataset", "synthetic"], ["--dataset synthetic", "would ignore --data DIR"]),
    (["--script", "SCRIPT", "--model", "mlp", "--epochs", "2", "--lr", "0.1"],
     ["--model, --epochs and --lr are for the built-in recipe", "your script (--script) would ignore them",
      "after '--'"]),
    (["--script", "SCRIPT", "--batch-size", "32"], ["--batch-size is for the built-in recipe"]),
    (["--script", "SCRIPT", "--balance", "measured"], ["--balance is for the built-in recipe",
                                                      "your script (--script) would ignore it"]),
    (["--dist-args", "{url}"], ["--dist-args is for your own script", "the built-in recipe would ignore it"]),
    # Smaller words
    (["--script", "DIR/train.sh"], ["train.sh starts with #!/bin/sh: it is not a Python script"]),
    (["--script", "DIR/train.bin"], ["train.bin is a binary file, not a Python script"]),
    (["--script", "DIR/train.ipynb"], ["train.ipynb is a Jupyter notebook, which Python cannot run as a script",
                                       "jupyter nbconvert --to script train.ipynb", "give the .py file"]),
    (["--script", "DIR/train.bat"], ["train.bat is a Windows batch file, not a Python script",
                                     "its python ... line", "own arguments after '--'"]),
    (["--lr", "inf"], ["learning rate must be a positive number, and finite (got inf)", "default is 0.02"]),
    (["--max-steps", "0"], ["max steps must be at least 1 (got 0)"]),
    (["--resume"], ["resume needs the checkpoint folder", "--checkpoint-dir"]),
    (["--data", "DIR/readme-only"], ["readme-only has no class folders", "1 file, such as README.md",
                                     "one sub-folder of images per class"]),
]


@pytest.mark.parametrize("args, words", SECOND_SWEEP, ids=[" ".join(a) or "EMPTY" for a, _ in SECOND_SWEEP])
def test_second_sweep_inputs_are_refused_before_anything_starts_and_leave_nothing(studio_home, tmp_path,
                                                                                 args, words):
    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    (tmp_path / "train.sh").write_text("#!/bin/sh\necho never run\n")
    (tmp_path / "train.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    (tmp_path / "train.ipynb").write_text('{\n "cells": [{"cell_type": "code", "source": ["import torch"]}],\n'
                                         ' "nbformat": 4\n}\n')
    (tmp_path / "train.bat").write_text("@echo off\r\npython train.py --epochs 3\r\n")
    (tmp_path / "readme-only").mkdir()
    (tmp_path / "readme-only" / "README.md").write_text("images go here")
    before = sorted(tmp_path.rglob("*"))
    real = [a.replace("DIR", str(tmp_path)).replace("SCRIPT", str(script)) for a in args]
    line = assert_rejected(ddpstudio("run", *real, cwd=tmp_path), *[w.replace("DIR", str(tmp_path)) for w in words])
    assert "Traceback" not in line
    assert_nothing_started(studio_home)
    assert sorted(tmp_path.rglob("*")) == before  # no tcp: folder, no typo/sub, no store file


def test_the_window_refuses_a_fixed_store_path_in_a_missing_folder(studio_home, tmp_path):
    """The window's "FileStore at a fixed path" goes through the same check (gui/preflight.py)."""
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.platform import current
    from ddpstudio.gui.form_state import SetupState
    from ddpstudio.gui.preflight import preflight

    checked = preflight(SetupState(store="fixed", store_path=str(tmp_path / "typo" / "sub" / "pg")),
                        detect_inventory(), current())
    assert [p.field for p in checked.problems] == ["store_path"] and checked.plan is None
    assert f"{tmp_path} has no typo" in checked.problems[0].message
    tcp = preflight(SetupState(store="fixed", store_path="tcp://127.0.0.1:29500"), detect_inventory(), current())
    assert [p.field for p in tcp.problems] == ["store_path"] and "tcp:// address" in tcp.problems[0].message
    assert list(tmp_path.iterdir()) == []


def test_workers_past_the_machine_need_oversubscribe_which_the_plan_says():
    from ddpstudio.core.capacity import WorkerRoom
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.plan import RecipeSpec
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import PolicyError, Request, build_plan

    small = WorkerRoom(cores=2, available_bytes=4 * 2**30, open_files=200)
    assert small.most(2) == 2 and small.problem(2, 2) is None
    assert small.problem(12, 2) == (
        "12 DataLoader workers per rank do not fit this machine: it has 2 CPU cores (room for 4 per rank at 4 per "
        "core over 2 ranks), 4.0 GiB of free memory (room for 2 per rank at about 0.5 GiB each, after 1 GiB per "
        "rank) and a limit of 200 open files per process (room for 9 at about 8 each); use at most 2 (0 loads "
        "data in each rank itself), or add --oversubscribe if you know it fits")
    assert "open files" not in WorkerRoom(cores=2, available_bytes=4 * 2**30, open_files=None).problem(12, 2)
    with pytest.raises(PolicyError, match="DataLoader workers per rank do not fit") as refused:
        build_plan(Request(world_size=2, recipe=RecipeSpec(workers=10000)), current(), detect_inventory())
    assert refused.value.field == "workers"
    plan = build_plan(Request(world_size=2, oversubscribe=True, recipe=RecipeSpec(workers=10000)), current(),
                      detect_inventory())
    assert plan.recipe.workers == 10000
    assert any("10000 per rank, chosen by you (past the" in r and "--oversubscribe" in r for r in plan.reasons)


def test_an_uneven_split_batch_is_said_in_the_plan():
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.plan import RecipeSpec
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import Request, build_plan

    plan = build_plan(Request(world_size=2, batch_mode="split", recipe=RecipeSpec(batch_size=3)), current(),
                      detect_inventory())
    assert plan.effective_batch == 2
    assert ("effective batch 2 = 2 ranks x 1 per rank (your batch of 3 does not split evenly over 2 ranks: "
            "rounded down to 2, 1 sample per step left out; give a multiple of 2 to train with all of it)") \
        in plan.reasons
    even = build_plan(Request(world_size=2, batch_mode="split", recipe=RecipeSpec(batch_size=4)), current(),
                      detect_inventory())
    assert "effective batch 4 = 2 ranks x 2 per rank" in even.reasons


@pytest.mark.posix_only("chmod 0 and geteuid: POSIX permissions")
def test_an_unreadable_data_folder_is_named_not_a_traceback(studio_home, tmp_path):
    """The dataset guess (cli/run.py) looked into the folder before validation and crashed there."""
    data = tmp_path / "data"
    _png(data / "cats" / "a.png")
    res = run_without_reading(data, "--data", str(data))
    assert "Traceback" not in res.stderr, res.stderr
    assert_rejected(res, f"the data folder {data} cannot be read", "Permission denied")
    assert_nothing_started(studio_home)


QUIET_SLEEPER = '''
import argparse, time
from datetime import timedelta
import torch.distributed as dist
p = argparse.ArgumentParser()
for name in ("--dist-url", "--dist-backend"):
    p.add_argument(name)
p.add_argument("--world-size", type=int); p.add_argument("--rank", type=int)
a = p.parse_args()
if a.rank == 1:
    time.sleep(600)  # never reaches init_process_group, and reports nothing
dist.init_process_group(a.dist_backend, init_method=a.dist_url, rank=a.rank, world_size=a.world_size,
                        timeout=timedelta(seconds=600))
'''


@pytest.mark.slow
def test_a_rank_that_never_reaches_init_process_group_ends_the_run_at_the_deadline(studio_home, tmp_path):
    """Issue 27: a quiet script (no reporter) whose rank sleeps before init_process_group waited for ever."""
    import time

    script = tmp_path / "sleeper.py"
    script.write_text(QUIET_SLEEPER, encoding="utf-8")
    t0 = time.monotonic()
    res = ddpstudio("run", "--json", "--rendezvous-timeout", "3", "--script", str(script), timeout=120)
    took = time.monotonic() - t0
    assert res.returncode == 1, res.stderr[-2000:]
    done = final(events(res.stdout))
    assert done.get("state") == protocol.FAILED
    cause = done.get("root_cause")["message"]
    assert cause.startswith("rendezvous stalled: rank(s) 0, 1 had not joined after 3 s"), cause
    assert "needs a longer --rendezvous-timeout" in cause
    assert took < 60, f"the stalled run took {took:.0f} s to end"
    assert not processes_of(studio_home)
