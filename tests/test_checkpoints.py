"""Checkpoints that cannot hurt: verified before any rank starts, loaded as tensors only, never overwritten.

Checkpoints are real files written by the rank's own ``save_atomic`` from a real
model of the recipe and its optimizer (the built-in perceptron); the bad ones are real damage (truncation, a
flipped byte, a pickle whose ``__reduce__`` would write a marker file).
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

import pytest

from ddpstudio.core import checkpoint as meta
from tests.conftest import processes_of
from tests.studio import TINY, ddpstudio

BAD_INPUT = 2
MLP = ("--model", "mlp", "--image-size", "8")  # what make_checkpoint saves by default


def make_checkpoint(folder: Path, model: str = "mlp", step: int = 2, complete: bool = False,
                    epochs: int = 1, image_size: int = 8) -> Path:
    """A checkpoint the way the recipe saves one: real weights, SGD momentum after one real step."""
    import torch

    from ddpstudio.rank.checkpoint import checkpoint_path, layout, save_atomic
    from ddpstudio.rank.models import build_model

    torch.manual_seed(0)
    net = build_model(model, 10, image_size)
    opt = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    torch.nn.functional.cross_entropy(net(torch.randn(2, 3, image_size, image_size)), torch.tensor([0, 1])).backward()
    opt.step()
    state = net.state_dict()
    return save_atomic(
        {"model": state, "optimizer": opt.state_dict(), "scaler": {}, "epoch": 0, "step_in_epoch": step,
         "epoch_complete": complete, "global_step": step, "model_name": model, "world_size": 2},
        checkpoint_path(folder),
        info={"model": model, "layout": layout(state), "global_step": step, "epoch": 0, "step_in_epoch": step,
              "epoch_complete": complete, "world_size": 2, "epochs": epochs, "max_steps": None})


class Evil:
    """Unpickling this calls ``open(marker, "w")``: what a hostile checkpoint does."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def make_malicious(folder: Path, marker: Path, forge_sidecar: bool) -> Path:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "checkpoint.pt"
    torch.save({"model": Evil(marker), "optimizer": {}, "scaler": {}, "epoch": 0, "global_step": 1}, path)
    if forge_sidecar:  # someone who knows the format can always write a matching sidecar
        info = meta.CheckpointInfo(
            sha256=meta.file_sha256(path), size=path.stat().st_size, model="resnet18", layout="x", global_step=1,
            epoch=0, step_in_epoch=1, epoch_complete=False, world_size=2, epochs=1, max_steps=None)
        (folder / "checkpoint.json").write_text(json.dumps(info.to_dict()), encoding="utf-8")
    return path


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# -- the check in core, on real files ---------------------------------------------------------

def test_what_the_recipe_saves_verifies_and_loads_as_tensors_only(tmp_path):
    import torch

    from ddpstudio.rank.checkpoint import load

    make_checkpoint(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "checkpoint.pt"]
    info = meta.verify(tmp_path, "mlp")
    assert (info.global_step, info.model, info.size) == (2, "mlp", (tmp_path / "checkpoint.pt").stat().st_size)
    assert meta.unsafe_globals(tmp_path / "checkpoint.pt") == []
    state, loaded = load(tmp_path, torch.device("cpu"), "mlp")
    assert loaded == info and state["global_step"] == 2 and "3.weight" in state["model"]  # the classifier layer


def damage_truncate(folder: Path) -> None:
    path = folder / "checkpoint.pt"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def damage_flip_a_byte(folder: Path) -> None:
    path = folder / "checkpoint.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def damage_drop_sidecar(folder: Path) -> None:
    (folder / "checkpoint.json").unlink()


def damage_garble_sidecar(folder: Path) -> None:
    (folder / "checkpoint.json").write_text('{"sha256": ', encoding="utf-8")


def damage_foreign_zip(folder: Path) -> None:
    """A zip that is not a torch archive, with a sidecar that matches it."""
    path = folder / "checkpoint.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02not a pickle at all")
    raw = json.loads((folder / "checkpoint.json").read_text())
    raw.update(sha256=meta.file_sha256(path), size=path.stat().st_size)
    (folder / "checkpoint.json").write_text(json.dumps(raw))


DAMAGE = [
    (damage_truncate, "truncated"),
    (damage_flip_a_byte, "does not match the checksum"),
    (damage_drop_sidecar, "has no checkpoint.json"),
    (damage_garble_sidecar, "cannot be read"),
    (damage_foreign_zip, "damaged pickle"),
]


@pytest.mark.parametrize("damage, words", DAMAGE, ids=[d.__name__ for d, _ in DAMAGE])
def test_damaged_checkpoints_are_refused_by_core_and_kept(tmp_path, damage, words):
    make_checkpoint(tmp_path)
    damage(tmp_path)
    before = files_of(tmp_path)
    with pytest.raises(meta.CheckpointError, match=words):
        meta.verify(tmp_path, "mlp")
    assert files_of(tmp_path) == before


@pytest.mark.parametrize("forge_sidecar", [False, True])
def test_a_malicious_pickle_never_runs(tmp_path, forge_sidecar):
    import torch

    from ddpstudio.rank.checkpoint import load_tensors

    marker = tmp_path / "PWNED"
    make_malicious(tmp_path / "ckpt", marker, forge_sidecar)
    with pytest.raises(meta.CheckpointError, match="would run code" if forge_sidecar else "no checkpoint.json"):
        meta.verify(tmp_path / "ckpt", "resnet18")
    if forge_sidecar:
        assert meta.unsafe_globals(tmp_path / "ckpt" / "checkpoint.pt") == ["io.open"]
    # The rank's own loader refuses it too (weights_only=True), should anything get past core.
    with pytest.raises(meta.CheckpointError, match="cannot be loaded safely"):
        load_tensors(tmp_path / "ckpt" / "checkpoint.pt", torch.device("cpu"))
    assert not marker.exists()


# -- through the CLI: one error line, exit 2, nothing started, nothing changed ------------------

def refuse(home: Path, folder: Path, *extra: str, words: tuple[str, ...]) -> None:
    before = files_of(folder)
    res = ddpstudio("run", "--resume", "--checkpoint-dir", str(folder), *extra)
    assert res.returncode == BAD_INPUT, res.stdout + res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("ddpstudio: error:")]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr
    for word in words:
        assert word in errors[0], errors[0]
    assert files_of(folder) == before, "a refused checkpoint must be left exactly as it was"
    assert not processes_of(home)
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_cli_refuses_a_malicious_checkpoint_before_any_rank_starts(studio_home, tmp_path):
    marker = tmp_path / "PWNED"
    make_malicious(tmp_path / "ckpt", marker, forge_sidecar=True)
    refuse(studio_home, tmp_path / "ckpt", words=("would run code", "io.open"))
    assert not marker.exists()


@pytest.mark.parametrize("damage, words", DAMAGE[:3], ids=[d.__name__ for d, _ in DAMAGE[:3]])
def test_cli_refuses_a_damaged_checkpoint(studio_home, tmp_path, damage, words):
    make_checkpoint(tmp_path)
    damage(tmp_path)
    refuse(studio_home, tmp_path, *MLP, words=("cannot resume", words))


def test_cli_refuses_another_models_checkpoint(studio_home, tmp_path):
    # The perceptron's checkpoint, resumed as resnet18 at 32 px (the warm cache's verdict): core compares the
    # model names (core/checkpoint.py verify). Saved by resnet18 and resumed as resnet34, as before, the command
    # line imported torchvision to probe resnet34 (not in the warm cache) and this process built resnet18.
    make_checkpoint(tmp_path)
    refuse(studio_home, tmp_path, "--model", "resnet18", words=("mlp model, not resnet18", "--model mlp"))


@pytest.mark.parametrize("extra, words", [
    (("--max-steps", "2"), ("at step 2", "the run stops at step 2", "nothing is left to train")),
    (("--epochs", "1"), ("completed all 1 epoch(s)", "nothing is left to train", "raise --epochs")),
])
def test_resume_of_a_finished_checkpoint_says_nothing_is_left(studio_home, tmp_path, extra, words):
    make_checkpoint(tmp_path, step=2, complete="--epochs" in extra)
    refuse(studio_home, tmp_path, *MLP, *extra, words=words)


@pytest.mark.slow
def test_diverging_loss_fails_the_run_and_keeps_the_last_good_checkpoint(studio_home, tmp_path):
    make_checkpoint(tmp_path, step=2)  # TINY's model
    before = files_of(tmp_path)
    # One rank: what is checked is the resume, the root cause and the files, not a peer (a loss that is not
    # finite stopping every rank is test_recipe_speed.py's diverging run, on two).
    res = ddpstudio("run", "--resume", "--checkpoint-dir", str(tmp_path), "--lr", "1e12", "--max-steps", "40",
                    "--world-size", "1", *TINY)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "resumed from" in res.stdout and "at step 2 (epoch 0, 2 of its steps done)" in res.stdout
    cause = re.search(r"root cause: (.*)", res.stdout)
    assert cause and re.search(r"loss became (NaN|infinite) at step \d+", cause.group(1)), res.stdout
    step = int(re.search(r"at step (\d+)", cause.group(1)).group(1))
    assert 2 < step < 40 and "learning rate too high" in cause.group(1)
    assert "run failed" in res.stdout
    assert files_of(tmp_path) == before, "the last good checkpoint must not be overwritten"
    assert not processes_of(studio_home)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.json", "checkpoint.pt"]
