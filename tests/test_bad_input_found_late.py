"""Issue 27, "tracebacks and wrong exit codes where a message belongs": what the ranks used to find out
after they started is refused before (exit 2, one line); what only a running rank can find (a bad image)
ends the run with one message naming the file, its traceback in the rank's log only; exports, the data
folder and 'join' say what is wrong in one line. Nothing is left behind."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.conftest import processes_of
from tests.studio import ddpstudio, events, final
from tests.test_bad_input import BAD_INPUT, _png, assert_nothing_started, assert_rejected


def _folder(root: Path, per_class: int) -> Path:
    for name in ("cats", "dogs"):
        for i in range(per_class):
            _png(root / name / f"{i}.png")
    return root


def _checkpoint_of_two_classes(folder: Path) -> Path:
    """A real checkpoint, written by the recipe's own writer, of an mlp for 2 classes at 8x8 pixels."""
    import torch

    from ddpstudio.core.mlp import mlp
    from ddpstudio.rank.checkpoint import layout, save_atomic

    model = mlp(2, 8)
    state = {"model": model.state_dict(), "optimizer": {}, "scaler": {}, "epoch": 0, "step_in_epoch": 1,
             "epoch_complete": False, "global_step": 1}
    save_atomic(state, folder / "checkpoint.pt", {
        "model": "mlp", "layout": layout(model.state_dict()), "global_step": 1, "epoch": 0, "step_in_epoch": 1,
        "epoch_complete": False, "world_size": 2, "epochs": 1, "max_steps": 100})
    assert torch.load(folder / "checkpoint.pt", weights_only=True)["global_step"] == 1
    return folder


def _cifar_without_the_rest(root: Path) -> Path:
    (root / "cifar-10-batches-py").mkdir(parents=True)
    (root / "cifar-10-batches-py" / "data_batch_1").write_bytes(b"junk")
    return root


# Each: what to prepare in DIR, the run's options, the key words of its one error line.
BEFORE_START = [
    pytest.param(lambda d: _folder(d / "small", 2), ["--data", "DIR/small", "--batch-size", "8"],
                 ["DIR/small (4 images, 1 held out for validation) gives 3 training samples",
                  "too few for one step of 2 ranks x batch 8 (16 samples)", "at most 1 per rank", "or add data"],
                 id="batch larger than the dataset"),
    pytest.param(None, ["--image-size", "100000"],
                 ["100000x100000 images need at least", "GiB free", "choose a smaller --image-size",
                  "--oversubscribe"], id="image size that cannot be allocated"),
    pytest.param(_checkpoint_of_two_classes, ["--image-size", "8", "--resume", "--checkpoint-dir", "DIR"],
                 ["DIR/checkpoint.pt holds a mlp of another layout than this run's",
                  "10 classes from the synthetic data, 8x8 images", "resume with the data it was trained with"],
                 id="checkpoint of another layout"),
    pytest.param(_cifar_without_the_rest, ["--dataset", "cifar10", "--data", "DIR"],
                 ["cifar-10-batches-py lacks data_batch_2", "test_batch", "batches.meta", "unpack"],
                 id="CIFAR-10 folder with one junk batch"),
    pytest.param(None, ["--model", "resnet18", "--batch-size", "1"],
                 ["resnet18 cannot train on one 32x32 image at a time", "Expected more than 1 value per channel",
                  "a batch of at least 2 per rank"], marks=pytest.mark.slow,  # probes torchvision's model
                 id="batch of 1 per rank through BatchNorm"),
    pytest.param(None, ["--model", "resnet18", "--batch-mode", "split", "--batch-size", "2", "--world-size", "2"],
                 ["resnet18 cannot train on one 32x32 image at a time",
                  "with --batch-mode split, --batch-size 4 or more"], marks=pytest.mark.slow,
                 id="batch split to 1 per rank through BatchNorm"),
]


@pytest.mark.parametrize("prepare, args, words", BEFORE_START)
def test_what_the_ranks_found_too_late_is_refused_before_any_rank_starts(studio_home, tmp_path, prepare, args,
                                                                         words):
    if prepare is not None:
        prepare(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    real = [a.replace("DIR", str(tmp_path)) for a in args]
    line = assert_rejected(ddpstudio("run", "--model", "mlp", "--max-steps", "2", *real),
                           *[w.replace("DIR", str(tmp_path)) for w in words])
    assert "Traceback" not in line
    assert_nothing_started(studio_home)
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.slow
def test_a_bad_image_found_mid_run_is_one_message_naming_it_and_the_traceback_stays_in_the_log(studio_home,
                                                                                               tmp_path):
    data = _folder(tmp_path / "data", 20)
    (data / "cats" / "zero.png").write_bytes(b"")
    # One DataLoader worker: the error crosses the worker's pipe and is raised again in the rank.
    res = ddpstudio("run", "--model", "mlp", "--data", str(data), "--batch-size", "4", "--image-size", "8",
                    "--max-steps", "20", "--workers", "1", "--rendezvous-timeout", "60")
    assert res.returncode == 1, res.stdout + res.stderr
    cause = [line for line in res.stdout.splitlines() if line.startswith("root cause:")]
    assert len(cause) == 1, res.stdout
    assert f"the image {data / 'cats' / 'zero.png'} cannot be read (an empty file, 0 bytes)" in cause[0]
    assert "remove it from the data folder" in cause[0]
    assert "Traceback" not in res.stdout and "Traceback" not in res.stderr, res.stdout
    run_dir = Path(res.stdout.split("logs: ")[-1].strip())
    logged = "".join(p.read_text() for p in (run_dir / "logs").glob("rank*.err.log"))
    assert "Traceback" in logged and "DataProblem" in logged
    assert not processes_of(studio_home)


@pytest.mark.slow
def test_a_scripts_traceback_is_printed_once(studio_home, tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(
        "import argparse, torch.distributed as dist\n"
        "p = argparse.ArgumentParser()\n"
        "for n in ('--dist-url', '--dist-backend', '--world-size', '--rank'): p.add_argument(n)\n"
        "a = p.parse_args()\n"
        "dist.init_process_group(a.dist_backend, init_method=a.dist_url, rank=int(a.rank),"
        " world_size=int(a.world_size))\n"
        "raise RuntimeError('boom in my script')\n", encoding="utf-8")
    res = ddpstudio("run", "--script", str(script), "--rendezvous-timeout", "60")
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stdout.count("raise RuntimeError('boom in my script')") == 1, res.stdout
    assert "root cause: rank" in res.stdout and "traceback is printed above, from rank 0" in res.stdout
    assert not processes_of(studio_home)


# -- the data folder (DDPSTUDIO_HOME) ---------------------------------------------------------------------

@pytest.mark.parametrize("command", [["doctor"], ["runs"], ["clean", "--dry-run"],
                                     ["run", "--model", "mlp", "--max-steps", "1"]])
@pytest.mark.parametrize("under", [False, True], ids=["the file", "a folder below it"])
def test_a_data_folder_that_is_a_file_is_named_for_every_command(tmp_path, monkeypatch, command, under):
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("DDPSTUDIO_HOME", str(home / "sub" if under else home))
    res = ddpstudio(*command)
    words = ["cannot be created", f"{home} is a file"] if under else [f"DDPSTUDIO_HOME ({home}) is a file"]
    assert_rejected(res, *words, "point DDPSTUDIO_HOME at a folder")
    assert "Traceback" not in res.stderr
    assert home.read_text() == "not a folder" and sorted(tmp_path.rglob("*")) == [home]


# -- exports ------------------------------------------------------------------------------------------------

@pytest.mark.posix_only("/proc refuses new files on Linux only")
def test_an_export_job_to_a_destination_it_cannot_write_is_one_line(studio_home, tmp_path):
    source = ["run", "--model", "mlp"]
    assert_rejected(ddpstudio("export-job", "--to", "torchrun", "-o", "/proc/x.sh", *source),
                    "the job file /proc/x.sh cannot be written in /proc")
    assert_rejected(ddpstudio("export-job", "--to", "torchrun", "-o", str(tmp_path), *source),
                    f"the job file {tmp_path} is a folder")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.posix_only("/proc refuses new files on Linux only")
def test_exports_to_destinations_they_cannot_write_are_one_line(studio_home, tmp_path):
    # One rank: the exports read the run's files, whatever the world size.
    res = ddpstudio("run", "--json", "--world-size", "1", "--model", "mlp", "--batch-size", "8", "--image-size", "8",
                    "--max-steps", "2", "--rendezvous-timeout", "60")
    assert res.returncode == 0, res.stderr[-2000:]
    run_id = final(events(res.stdout)).get("run_dir").rsplit("/", 1)[-1]
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for args, words in [(["--csv", "/proc/x.csv"], ["the CSV file /proc/x.csv cannot be written in /proc"]),
                        (["--csv", str(tmp_path)], [f"the CSV file {tmp_path} is a folder"]),
                        (["--csv", str(tmp_path / "no" / "x.csv")], ["does not exist"]),
                        (["--tensorboard", str(a_file)], [f"{a_file} is a file, not a folder"]),
                        (["--tensorboard", "/proc/tb"], ["the TensorBoard folder /proc/tb is not writable"])]:
        assert_rejected(ddpstudio("export", run_id, *args), *words)
    assert sorted(tmp_path.iterdir()) == [a_file] and a_file.read_text() == "x"


# -- join -----------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_join_to_an_unreachable_host_keeps_torchs_stack_frames_in_the_log(studio_home):
    import platform

    import torch

    import ddpstudio as package
    from ddpstudio.core.nodes import joincode

    with socket.socket() as sock:  # a port of this machine's loopback that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    versions = {"ddpstudio": package.__version__, "python": platform.python_version(), "torch": torch.__version__}
    code = joincode.encode(joincode.JoinCode(("127.0.0.1",), port, "r1", 2, 1, joincode.new_token(), versions))
    res = ddpstudio("join", code, "--join-timeout", "4")
    assert res.returncode == BAD_INPUT, res.stdout + res.stderr
    assert f"could not reach the host at 127.0.0.1:{port}" in res.stderr
    assert "frame #" not in res.stderr and "Exception raised from" not in res.stderr, res.stderr
    assert len(res.stderr.splitlines()) <= 3, res.stderr
    assert "logs: None" not in res.stdout, res.stdout
    assert (res.stdout + res.stderr).count("could not reach the host") == 1, res.stdout + res.stderr  # said once
    kept = (studio_home / "logs" / "torch-native.log").read_text()
    assert "frame #" in kept and f"127.0.0.1, {port}" in kept
    assert not processes_of(studio_home)
    assert not (studio_home / "runs").exists() or not any((studio_home / "runs").iterdir())

