"""A full or read-only disk: one clear message, the run stopped and recorded as failed, nothing left.

The disks are real: a small tmpfs mounted over the test's DDP Studio home (or
a checkpoint folder) and really filled to ENOSPC, or mounted read-only. That
needs root (or CAP_SYS_ADMIN); elsewhere the tests skip and say so.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from tests.conftest import killed_after, processes_of
from tests.studio import ENDLESS, TINY, ddpstudio, events, final

BAD_INPUT = 2


def mount_tmpfs(where: Path, size: str, read_only: bool = False) -> None:
    options = f"size={size}" + (",ro" if read_only else "")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                         text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {res.stderr.strip()}")


@pytest.fixture
def small_disk(request):
    """Mounts tmpfs filesystems on demand; every one is unmounted at teardown (lazily, if still busy)."""
    mounted: list[Path] = []

    def mount(where: Path, size: str = "32m", read_only: bool = False) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        mount_tmpfs(where, size, read_only)
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path) -> Path:
    """Write one file until the disk says ENOSPC, then the last few blocks."""
    filler = folder / "filler.bin"
    with open(filler, "wb", buffering=0) as fh:
        for chunk in (2**20, 4096, 1):
            while True:
                try:
                    fh.write(b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    return filler


def error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("ddpstudio: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_disk_full_at_start_is_one_message_and_no_run_folder(studio_home, small_disk):
    small_disk(studio_home)
    fill(studio_home)
    res = ddpstudio("run", "--max-steps", "1", *TINY)
    assert res.returncode == BAD_INPUT, res.stdout + res.stderr
    line = error_line(res.stderr)
    assert f"the disk holding {studio_home / 'runs'} is full (0.0 MiB free)" in line, line
    assert res.stdout == ""
    assert not (studio_home / "runs").exists() or not any((studio_home / "runs").iterdir())
    assert not processes_of(studio_home)


@pytest.mark.slow
def test_read_only_data_folder_refuses_run_and_keeps_doctor_and_clean_working(studio_home, small_disk):
    small_disk(studio_home, read_only=True)
    res = ddpstudio("run", "--max-steps", "1", *TINY)
    assert res.returncode == BAD_INPUT, res.stdout + res.stderr
    assert f"the disk holding {studio_home / 'runs'} is read-only" in error_line(res.stderr)
    doctor = ddpstudio("doctor")
    assert doctor.returncode == 0 and "Traceback" not in doctor.stderr, doctor.stderr
    assert "leftovers: none" in doctor.stdout
    clean = ddpstudio("clean", "--dry-run")
    assert clean.returncode == 0 and "Traceback" not in clean.stderr, clean.stderr
    assert not processes_of(studio_home)


@pytest.mark.slow
def test_a_broken_registry_is_reported_and_skipped_by_run_doctor_and_clean(studio_home):
    (studio_home / "registry").write_text("not a folder")
    for args in (("doctor",), ("clean", "--dry-run")):
        res = ddpstudio(*args)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        assert f"{studio_home / 'registry'}: the registry cannot be listed" in res.stdout, res.stdout
    run = ddpstudio("run", "--json", "--world-size", "1", "--max-steps", "1", *TINY)  # one rank: about the registry
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    warnings = [e.get("message") for e in events(run.stdout) if e.type == protocol.WARNING]
    assert any("could not record the run in the registry" in w for w in warnings), warnings
    assert final(events(run.stdout)).get("state") == protocol.FINISHED
    (studio_home / "registry").unlink()
    (studio_home / "registry").mkdir()
    (studio_home / "registry" / "a.json").mkdir()  # unreadable as a file, whoever we run as
    (studio_home / "registry" / "b.json").write_bytes(b"\xff\xfe garbage")
    res = ddpstudio("clean", "--dry-run")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "a.json" in res.stdout and "b.json: not UTF-8 text" in res.stdout, res.stdout


@pytest.mark.slow
def test_disk_filling_up_during_a_run_stops_it_as_failed(studio_home, small_disk):
    small_disk(studio_home, size="48m")
    # One rank: the launcher's own writes meet the full disk, whatever the world size.
    cli = subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--json", "--world-size", "1", *ENDLESS, *TINY],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    try:
        with killed_after(cli, what="ddpstudio run, before its first global step"):
            for line in cli.stdout:
                lines.append(line)
                if '"type":"global_step"' in line:
                    break
        fill(studio_home)
        t0 = time.monotonic()
        out, err = cli.communicate(timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        if cli.poll() is None:
            cli.kill()
    evs = events("".join(lines) + out)
    done = final(evs)
    run_dir = Path(evs[0].get("run_dir"))
    assert cli.returncode == 1, err
    assert done.get("state") == protocol.FAILED
    assert done.get("summary").startswith(f"the disk holding {run_dir} is full ("), done.get("summary")
    assert "MiB free" in done.get("summary")
    assert elapsed < 90, f"stopping took {elapsed:.1f} s"  # the next write needing a new block fails
    record = json.loads((studio_home / "registry" / f"{run_dir.name}.json").read_text())
    assert record["state"] == protocol.FAILED, "the registry must not keep the run marked running"
    assert not processes_of(studio_home)


@pytest.mark.slow
def test_a_full_disk_while_saving_a_checkpoint_keeps_the_previous_one(studio_home, tmp_path, small_disk):
    from tests.test_checkpoints import files_of, make_checkpoint

    ckpt = small_disk(tmp_path / "ckpt", size="120m")  # one resnet18 checkpoint (90 MB) fits, two do not
    make_checkpoint(ckpt, model="resnet18", image_size=32, step=2)
    before = files_of(ckpt)
    # resnet18, not TINY's perceptron: the test needs a checkpoint as big as the disk's free space allows once.
    # One rank: rank 0 alone saves checkpoints, whatever the world size.
    res = ddpstudio("run", "--json", "--world-size", "1", "--resume", "--checkpoint-dir", str(ckpt), "--max-steps", "3",
                    "--batch-size", "8", "--image-size", "32", "--rendezvous-timeout", "60")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr
    summary = final(events(res.stdout)).get("summary")
    assert f"could not save the checkpoint: the disk holding {ckpt} is full (" in summary, summary
    assert "the previous checkpoint there is unchanged" in summary
    assert "inline_container" not in summary
    assert files_of(ckpt) == before
    assert not processes_of(studio_home)
