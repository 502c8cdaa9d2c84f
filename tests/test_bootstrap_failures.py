"""Each failure: one plain message, its own exit code, and nothing left marked as set up.

These run the real ``python -m ddpstudio.bootstrap setup`` and stop before
anything is downloaded (the driver seam, a disk check, missing files); the
network failure, which needs the real uv, is in test_bootstrap_e2e.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ddpstudio.bootstrap import failure
from ddpstudio.bootstrap.failure import Problem, classify
from ddpstudio.bootstrap.layout import RECORD_NAME, Layout
from ddpstudio.core.platform import current


def stage_fake_root(root: Path) -> Path:
    """An installation folder whose uv and wheel exist (the checks only look)."""
    (root / "wheels").mkdir(parents=True)
    (root / "wheels" / "ddpstudio-0.1.0-py3-none-any.whl").write_bytes(b"not opened before the failure")
    Layout(root, current()).uv.write_bytes(b"")
    stale = root / "env" / RECORD_NAME
    stale.parent.mkdir()
    stale.write_text(json.dumps({"app_version": "0.1.0"}))
    return root


def setup(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPSTUDIO_BOOTSTRAP")}
    proc = subprocess.run(
        [sys.executable, "-m", "ddpstudio.bootstrap", "setup", "--root", str(root), "--no-window", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert psutil.Process().children(recursive=True) == []
    return proc


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_driver_too_old(tmp_path):
    root = stage_fake_root(tmp_path)
    proc = setup(root, "--cuda-driver", "12.4")
    assert proc.returncode == Problem.DRIVER_TOO_OLD.exit_code
    message = last_line(proc.stderr)
    assert "NVIDIA driver is too old" in message and "CUDA 12.4" in message and "Retry" in message
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "FAILED (DRIVER_TOO_OLD)" in (root / "logs" / "bootstrap.log").read_text()


def test_driver_too_old_can_still_take_the_cpu_build_up_to_the_disk_check(tmp_path):
    root = stage_fake_root(tmp_path)
    proc = setup(root, "--cuda-driver", "12.4", "--cpu", "--min-free-gb", "1e9")
    assert proc.returncode == Problem.DISK_FULL.exit_code  # got past the driver, stopped at the disk
    assert "PyTorch build: cpu" in proc.stdout


def test_not_enough_disk_space(tmp_path):
    root = stage_fake_root(tmp_path)
    proc = setup(root, "--cuda-driver", "none", "--min-free-gb", "1e9")
    assert proc.returncode == Problem.DISK_FULL.exit_code
    assert "not enough free disk space" in last_line(proc.stderr)
    assert "Retry" in last_line(proc.stderr)
    # Stopped before it changed anything: the previous record is untouched.
    assert (root / "env" / RECORD_NAME).exists()


def test_missing_uv(tmp_path):
    root = stage_fake_root(tmp_path)
    Layout(root, current()).uv.unlink()
    proc = setup(root)
    assert proc.returncode == Problem.FILES_MISSING.exit_code
    assert "Run the DDP Studio installer again" in last_line(proc.stderr)


def test_missing_wheel(tmp_path):
    root = stage_fake_root(tmp_path)
    (root / "wheels" / "ddpstudio-0.1.0-py3-none-any.whl").unlink()
    proc = setup(root)
    assert proc.returncode == Problem.FILES_MISSING.exit_code
    assert "ddpstudio-*.whl" in last_line(proc.stderr)


def test_no_root_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ddpstudio.bootstrap", "setup", "--no-window"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--root" in proc.stderr
    assert psutil.Process().children(recursive=True) == []


# uv's own words for the failures we cannot cause here for real.
@pytest.mark.parametrize(
    "output, problem",
    [
        ("error: Failed to install: torch-2.14.1-cp311-cp311-win_amd64.whl\n  Caused by: failed to write to file: "
         "There is not enough space on the disk. (os error 112)", Problem.DISK_FULL),
        ("error: Failed to extract archive\n  Caused by: No space left on device (os error 28)", Problem.DISK_FULL),
        ("error: Failed to fetch: `https://download.pytorch.org/whl/cu128/torch/`\n  Caused by: Request failed after "
         "3 retries\n  Caused by: error sending request for url\n  Caused by: dns error: No such host is known. (os error 11001)",
         Problem.NETWORK),
        ("error: Failed to download `https://github.com/astral-sh/python-build-standalone/releases/...`\n  Caused by: "
         "tcp connect error: A connection attempt failed (os error 10060)", Problem.NETWORK),
        ("error: failed to remove file `C:\\...\\env\\Lib\\site-packages\\torch\\lib\\c10.dll`: The process cannot "
         "access the file because it is being used by another process. (os error 32)", Problem.FILES_IN_USE),
        ("  x No solution found when resolving dependencies:\n  `-> Because torch==2.14.1 has no wheels with a "
         "matching platform tag ...", Problem.INSTALL_FAILED),
    ],
)
def test_uv_errors_are_classified(output, problem):
    assert classify(output) is problem
    made = failure.from_uv("installing PyTorch and DDP Studio", output, 2)
    assert made.problem is problem
    assert "Retry" in made.message and "os error" not in made.message  # plain words only


def test_every_problem_has_its_own_exit_code():
    codes = [p.exit_code for p in Problem]
    assert len(codes) == len(set(codes)) and 0 not in codes and 2 not in codes  # 2 is argparse's


def test_one_setup_at_a_time(tmp_path):
    """A second setup on the same installation (shortcut clicked while the installer's window runs) is refused."""
    from ddpstudio.bootstrap.lock import SetupLock

    root = stage_fake_root(tmp_path)
    held = SetupLock(Layout(root, current()).lock_file)
    assert held.acquire()
    try:
        proc = setup(root, "--cuda-driver", "none")
        assert proc.returncode == Problem.BUSY.exit_code
        assert "already being set up" in last_line(proc.stderr)
    finally:
        held.release()
    proc = setup(root, "--cuda-driver", "none", "--min-free-gb", "1e9")
    assert proc.returncode == Problem.DISK_FULL.exit_code  # the lock is free again: it got as far as the disk check


def test_verification_verdicts():
    """What the check's result must show, per build (the check itself runs in test_bootstrap_e2e)."""
    from ddpstudio.bootstrap.cuda_index import CPU_BUILD, CUDA_BUILDS
    from ddpstudio.bootstrap.verify import judge, parse

    good_cpu = {"gloo_available": True, "gloo_all_reduce": True, "cuda_available": False, "cuda_error": None}
    judge(good_cpu, CPU_BUILD)
    with pytest.raises(failure.BootstrapFailure) as info:
        judge(good_cpu, CUDA_BUILDS[0])
    assert info.value.problem is Problem.NOT_VERIFIED and info.value.cpu_fallback
    with pytest.raises(failure.BootstrapFailure) as info:
        judge({**good_cpu, "cuda_available": True, "cuda_error": "GTX 680: no kernel image is available"}, CUDA_BUILDS[0])
    assert "cannot run on your GPU" in info.value.message and info.value.cpu_fallback
    with pytest.raises(failure.BootstrapFailure) as info:
        judge({**good_cpu, "gloo_all_reduce": False}, CPU_BUILD)
    assert "Gloo" in info.value.message and not info.value.cpu_fallback
    assert parse('noise\nDDPSTUDIO-VERIFY {"torch": "2.14.1"}\n') == {"torch": "2.14.1"}
    assert parse("Traceback (most recent call last):\nImportError: DLL load failed") is None
