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

from ddpstudio.bootstrap import failure, network
from ddpstudio.bootstrap.failure import Problem, classify
from ddpstudio.bootstrap.layout import RECORD_NAME, Layout
from ddpstudio.bootstrap.uv import Uv
from ddpstudio.core.platform import current

REPO = Path(__file__).resolve().parents[1]


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
    proc = setup(root, "--cuda-driver", "11.4")  # an R470 driver
    assert proc.returncode == Problem.DRIVER_TOO_OLD.exit_code
    message = last_line(proc.stderr)
    assert "NVIDIA driver is too old" in message and "CUDA 11.4" in message and "Retry" in message
    assert "driver 525 or newer" in message
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "FAILED (DRIVER_TOO_OLD)" in (root / "logs" / "bootstrap.log").read_text()


def test_driver_too_old_can_still_take_the_cpu_build_up_to_the_disk_check(tmp_path):
    root = stage_fake_root(tmp_path)
    proc = setup(root, "--cuda-driver", "11.4", "--cpu", "--min-free-gb", "1e9")
    assert proc.returncode == Problem.DISK_FULL.exit_code  # got past the driver, stopped at the disk
    assert "PyTorch build: cpu" in proc.stdout


def test_blackwell_on_an_r570_driver_needs_a_driver_update(tmp_path):
    root = stage_fake_root(tmp_path)
    proc = setup(root, "--driver-cuda", "12.8", "--compute", "12.0")
    assert proc.returncode == Problem.DRIVER_TOO_OLD.exit_code
    message = last_line(proc.stderr)
    assert "cu130" in message and "driver 580 or newer" in message and "CPU build" in message


def test_gpus_no_single_build_covers_offer_the_cpu_build_not_retry(tmp_path):
    root = stage_fake_root(tmp_path)
    proc = setup(root, "--driver-cuda", "13.0", "--compute", "6.1,12.0")
    assert proc.returncode == Problem.GPU_UNSUPPORTED.exit_code
    message = last_line(proc.stderr)
    assert "No single PyTorch 2.14.1 build runs on all these GPUs" in message and "CPU build" in message
    assert "Retry" not in message


def test_pascal_on_r580_takes_cu126_up_to_the_disk_check(tmp_path):
    root = stage_fake_root(tmp_path)
    proc = setup(root, "--driver-cuda", "13.0", "--compute", "6.1", "--min-free-gb", "1e9")
    assert proc.returncode == Problem.DISK_FULL.exit_code
    assert "PyTorch build: cu126" in proc.stdout and "cu130 has no kernels for compute 6.1 (Pascal)" in proc.stdout


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


# uv 0.13.9's own words (`uv pip compile` of torch==2.14.1 with an extra index
# that has only torch 2.11.0; reproduced by test_an_index_without_the_pin_names_itself).
UV_NOT_ON_INDEX = (
    "error: No solution found when resolving dependencies\n  cause: Because there is no version of torch==2.14.1 and "
    "you require torch==2.14.1, we can conclude that your requirements are unsatisfiable.\n\nhint: `torch` was found "
    "on https://download.pytorch.org/whl/cu128, but not at the requested version (torch==2.14.1). A compatible version "
    "may be available on a subsequent index (e.g., https://pypi.org/simple). By default, uv will only consider "
    "versions that are published on the first index that contains a given package"
)


def test_an_index_without_the_pinned_torch_is_named_and_offers_the_cpu_build():
    assert classify(UV_NOT_ON_INDEX) is Problem.NOT_ON_INDEX
    made = failure.from_uv("installing PyTorch and DDP Studio", UV_NOT_ON_INDEX, 1, "https://example.invalid/whl/cu999")
    assert made.problem is Problem.NOT_ON_INDEX and made.exit_code == 13
    assert "https://download.pytorch.org/whl/cu128" in made.message  # the index uv names wins
    assert "torch==2.14.1" in made.message and made.cpu_fallback and not made.retry_helps
    no_hint = failure.from_uv("installing", "Because there is no version of torch==2.14.1 and you require it", 1, "file:///m/simple")
    assert "file:///m/simple" in no_hint.message


def test_an_index_without_the_pin_names_itself(tmp_path):
    """The real uv against a real index folder that has torch, but not 2.14.1 (no network)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "installer"))
    import uvbinary

    uv = REPO / "build" / "installer" / "uv-cache"
    found = sorted(uv.glob("uv-*-manylinux*/uv")) if sys.platform.startswith("linux") else []
    if not found:
        try:
            found = [uvbinary.uv_binary(uvbinary.LINUX, uv)] if sys.platform.startswith("linux") else []
        except Exception as exc:  # noqa: BLE001 - no registry here: say so
            pytest.skip(f"no Linux uv binary: {exc}")
    if not found:
        pytest.skip("the real-uv check runs on Linux")
    index = make_index_with_old_torch(tmp_path / "simple")
    # With the corporate-network settings the window saves: uv must accept them as they are.
    layout = Layout(tmp_path, current())
    network.save(layout.network_file, network.NetworkSettings("http://proxy.invalid:3128", True, "https://mirror.invalid/python"))
    env = Uv(layout, found[-1], base_env=dict(os.environ)).environment()
    assert env["UV_SYSTEM_CERTS"] == "true" and env["HTTPS_PROXY"] == "http://proxy.invalid:3128"
    proc = subprocess.run(
        [str(found[-1]), "pip", "compile", "--no-config", "--color", "never", "-", "--extra-index-url", index.as_uri(),
         "--default-index", (tmp_path / "empty").as_uri(), "--python-version", "3.11", "--python-platform", "windows",
         "--cache-dir", str(tmp_path / "cache"), "--offline"],
        input="torch==2.14.1\n", capture_output=True, text=True, timeout=60, env=env,
    )
    assert proc.returncode != 0
    made = failure.from_uv("installing PyTorch and DDP Studio", proc.stderr, proc.returncode, "unused")
    assert made.problem is Problem.NOT_ON_INDEX, proc.stderr
    assert index.as_uri() in made.message and made.cpu_fallback and not made.retry_helps
    assert psutil.Process().children(recursive=True) == []


def test_network_settings_reach_uv(tmp_path):
    layout = Layout(tmp_path, current())
    assert network.load(layout.network_file) == network.NetworkSettings()  # nothing saved: uv's defaults
    layout.network_file.write_text("{not json")
    assert network.load(layout.network_file) == network.NetworkSettings()
    network.save(layout.network_file, network.NetworkSettings(" http://p:8080 ", True, "https://m.example/py/"))
    env = Uv(layout, tmp_path / "uv", base_env={"HTTPS_PROXY": "http://old:1", "VIRTUAL_ENV": "x"}).environment()
    assert env["HTTPS_PROXY"] == env["HTTP_PROXY"] == "http://p:8080"  # what the user saved wins
    assert env["UV_SYSTEM_CERTS"] == "true" and env["UV_PYTHON_INSTALL_MIRROR"] == "https://m.example/py"
    assert "VIRTUAL_ENV" not in env
    plain = Uv(Layout(tmp_path / "other", current()), tmp_path / "uv", base_env={}).environment()
    assert not {"HTTPS_PROXY", "UV_SYSTEM_CERTS", "UV_PYTHON_INSTALL_MIRROR"} & set(plain)
    assert "system certificates" in network.load(layout.network_file).describe()


def make_index_with_old_torch(simple: Path) -> Path:
    """A PEP 503 folder index whose torch has only a tiny 2.11.0 wheel."""
    import zipfile

    (simple / "torch").mkdir(parents=True)
    (simple.parent / "empty").mkdir(exist_ok=True)
    name = "torch-2.11.0-py3-none-any.whl"
    with zipfile.ZipFile(simple / "torch" / name, "w") as whl:
        info = "torch-2.11.0.dist-info"
        whl.writestr("torch/__init__.py", "")
        whl.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")
    (simple / "torch" / "index.html").write_text(f'<html><body><a href="{name}">{name}</a></body></html>')
    return simple
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
