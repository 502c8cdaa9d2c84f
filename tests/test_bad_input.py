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
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "crash_on_import.py"), *TINY[-2:])
    assert res.returncode == 1
    done = final(events(res.stdout))
    assert done.get("state") == protocol.FAILED
    assert done.get("root_cause")["message"] == "ModuleNotFoundError: No module named 'a_module_that_does_not_exist'"
    assert not processes_of(studio_home)
    assert not ckpt.exists()
    # On a terminal the same failure reads as one root-cause line.
    human = ddpstudio("run", "--script", str(SCRIPTS / "crash_on_import.py"))
    assert human.returncode == 1
    assert "root cause: rank" in human.stdout and "No module named 'a_module_that_does_not_exist'" in human.stdout


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


@pytest.mark.posix_only("chmod 0 and geteuid: POSIX permissions")
def test_an_unreadable_class_folder_is_named(studio_home, tmp_path):
    _png(tmp_path / "data" / "dogs" / "a.png")
    _png(tmp_path / "data" / "cats" / "b.png")
    (tmp_path / "data" / "cats").chmod(0)
    command = [sys.executable, "-m", "ddpstudio", "run", "--data", str(tmp_path / "data")]
    if os.geteuid() == 0:  # root reads anything; drop the two capabilities that let it
        if not shutil.which("setpriv"):
            pytest.skip("running as root and setpriv (util-linux) is missing: cannot make a folder unreadable")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *command]
    try:
        res = subprocess.run(command, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    finally:
        (tmp_path / "data" / "cats").chmod(0o755)
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
