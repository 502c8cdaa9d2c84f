"""The driver -> PyTorch wheel index table, the NVML reading behind it, and the pins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ddpstudio.bootstrap import driver
from ddpstudio.bootstrap.cuda_index import CPU_BUILD, CUDA_BUILDS, CudaVersion, DriverTooOld, choose_build, table_markdown
from ddpstudio.bootstrap.pins import PINS
from ddpstudio.core.platform import LINUX, WINDOWS, current

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "driver_cuda, tag",
    [
        ("14.1", "cu130"),  # a driver newer than every build: the newest build
        ("13.2", "cu130"),
        ("13.0", "cu130"),
        ("12.9", "cu128"),
        ("12.8", "cu128"),
        ("12.7", "cu126"),
        ("12.6", "cu126"),
        ("12080", "cu128"),  # NVML's integer form
    ],
)
def test_newest_build_the_driver_can_run(driver_cuda, tag):
    build = choose_build(CudaVersion.parse(driver_cuda))
    assert build.tag == tag
    assert build.index_url == f"https://download.pytorch.org/whl/{tag}"
    assert build.uses_gpu and build.cuda <= CudaVersion.parse(driver_cuda)


def test_no_driver_gets_the_cpu_build():
    build = choose_build(None)
    assert build is CPU_BUILD
    assert build.index_url == "https://download.pytorch.org/whl/cpu" and not build.uses_gpu


@pytest.mark.parametrize("driver_cuda", ["12.4", "12.0", "11.8"])
def test_driver_older_than_every_build_is_refused(driver_cuda):
    with pytest.raises(DriverTooOld) as info:
        choose_build(CudaVersion.parse(driver_cuda))
    assert info.value.oldest.tag == "cu126"
    assert str(info.value.driver_cuda) == driver_cuda


def test_cuda_versions_parse_and_order():
    assert CudaVersion.parse("12.8.1") == CudaVersion(12, 8)
    assert CudaVersion.from_nvml(13000) == CudaVersion(13, 0)
    assert CudaVersion.from_nvml(12060) == CudaVersion(12, 6)
    assert CudaVersion(12, 10) > CudaVersion(12, 9)  # numeric, not textual
    for bad in ("", "twelve", "12", "12.x"):
        with pytest.raises(ValueError):
            CudaVersion.parse(bad)


def test_table_is_newest_first():
    versions = [b.cuda for b in CUDA_BUILDS]
    assert versions == sorted(versions, reverse=True)


def test_docs_show_the_same_table():
    assert table_markdown() in (REPO / "docs" / "install.md").read_text(encoding="utf-8")


def test_pins_match_the_repository_constraints():
    constraints = {
        line.strip()
        for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert set(PINS) == constraints


def test_nvml_without_a_driver_is_a_state(monkeypatch):
    monkeypatch.delenv(driver.OVERRIDE_ENV, raising=False)
    info = driver.detect(current())
    if info.cuda is not None:
        pytest.skip("this machine has an NVIDIA driver")
    assert info.state.startswith("not available")
    assert "No NVIDIA driver" in info.describe()


def test_nvml_library_locations():
    env = {"SystemRoot": r"C:\Windows", "ProgramW6432": r"C:\Program Files"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        candidates = driver.nvml_library_candidates(WINDOWS)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert candidates[0].replace("\\", "/").endswith("Windows/System32/nvml.dll")
    assert candidates[1].replace("\\", "/").endswith("NVIDIA Corporation/NVSMI/nvml.dll")
    assert driver.nvml_library_candidates(LINUX)[0] == "libnvidia-ml.so.1"


def test_driver_seam(monkeypatch):
    monkeypatch.setenv(driver.OVERRIDE_ENV, "12.8")
    assert driver.detect(LINUX).cuda == CudaVersion(12, 8)
    assert driver.detect(LINUX, override="none").cuda is None  # the argument wins over the variable
    monkeypatch.setenv(driver.OVERRIDE_ENV, "none")
    assert driver.detect(WINDOWS).cuda is None


@pytest.mark.parametrize(
    "seam, code, tag",
    [("13.1", 0, "cu130"), ("12.8", 0, "cu128"), ("none", 0, "cpu"), ("12.2", 4, None)],
)
def test_choose_command(tmp_path, seam, code, tag):
    env = {**os.environ, driver.OVERRIDE_ENV: seam}
    proc = subprocess.run(
        [sys.executable, "-m", "ddpstudio.bootstrap", "choose", "--root", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert proc.returncode == code, proc.stderr
    assert json.loads(proc.stdout)["build"] == tag
    assert list(tmp_path.iterdir()) == []  # "choose" changes nothing
    assert psutil.Process().children(recursive=True) == []
