"""Bad input: one clear message, a non-zero exit, and nothing left behind."""

from __future__ import annotations

import json
import socket

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
@pytest.mark.parametrize("command", ["run", "bench"])
def test_unknown_exchange_values(studio_home, command, args, words):
    assert_rejected(ddpstudio(command, *args), *words)
    assert_nothing_started(studio_home)
