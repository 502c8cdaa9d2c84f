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
from ddpstudio.bootstrap.cuda_index import (
    BUILDS_BY_TORCH, CPU_BUILD, CUDA_BUILDS, TORCH_VERSION, Compute, CudaVersion, NoGpuBuild, Verdict, choose, choose_build,
    table_markdown,
)
from ddpstudio.bootstrap.pins import PINS
from ddpstudio.core.platform import LINUX, WINDOWS, current

REPO = Path(__file__).resolve().parents[1]


# Which CUDA version each driver branch reports through NVML (nvidia-smi's
# "CUDA Version"): R470 11.4, R535 12.2, R560 12.6, R570 12.8, R580 13.0, R590 13.1.
GTX_1080, V100, RTX_3090, RTX_4090, H100, RTX_5090, K80 = "6.1", "7.0", "8.6", "8.9", "9.0", "12.0", "3.7"
R470, R535, R560, R570, R580, R590 = "11.4", "12.2", "12.6", "12.8", "13.0", "13.1"


@pytest.mark.parametrize(
    "case, driver_cuda, gpus, tag, verdict",
    [
        ("GTX 1080 + R580: cu13x has no Pascal kernels", R580, [GTX_1080], "cu126", None),
        ("V100 + R580: cu13x has no Volta kernels", R580, [V100], "cu126", None),
        ("RTX 4090 + R560", R560, [RTX_4090], "cu126", None),
        ("RTX 4090 + R570: cu128 is gone in 2.14", R570, [RTX_4090], "cu126", None),
        ("RTX 5090 + R570: only cu13x has Blackwell kernels, and it needs R580", R570, [RTX_5090], None, Verdict.DRIVER_TOO_OLD),
        ("RTX 5090 + R580", R580, [RTX_5090], "cu130", None),
        ("H100 + R580", R580, [H100], "cu130", None),
        ("RTX 4090 + R590: supported outright beats minor-version compatibility", R590, [RTX_4090], "cu130", None),
        ("RTX 4090 + a CUDA 13.2 driver", "13.2", [RTX_4090], "cu132", None),
        ("mixed Pascal + Ada: cu126 has kernels for both", R580, [GTX_1080, RTX_4090], "cu126", None),
        ("mixed Pascal + Blackwell: no single build", R580, [GTX_1080, RTX_5090], None, Verdict.MIXED),
        ("RTX 3090 + R535: cu126 through minor-version compatibility", R535, [RTX_3090], "cu126", None),
        ("Kepler on an old driver: no driver update helps", R470, [K80], None, Verdict.GPU_UNSUPPORTED),
        ("Kepler on a new driver", R580, [K80], None, Verdict.GPU_UNSUPPORTED),
        ("R470: driver too old for anything", R470, [RTX_3090], None, Verdict.DRIVER_TOO_OLD),
        ("unknown GPUs: the driver alone decides", R580, [], "cu130", None),
        ("no driver", None, [], "cpu", None),
    ],
)
def test_build_choice(case, driver_cuda, gpus, tag, verdict):
    driver = CudaVersion.parse(driver_cuda) if driver_cuda else None
    computes = tuple(Compute.parse(g) for g in gpus)
    choice = choose(driver, computes)
    assert (choice.build.tag if choice.build else None) == tag, (case, choice.reason)
    assert choice.verdict == verdict, case
    assert choice.reason
    if tag and tag != "cpu":
        assert choice.build.runs_driver(driver) and all(choice.build.runs_gpu(g) for g in computes)
        assert choice.reason.startswith(tag)
    if verdict is not None:
        with pytest.raises(NoGpuBuild):
            choose_build(driver, computes)


def test_reasons_say_what_to_do():
    blackwell_on_r570 = choose(CudaVersion.parse(R570), (Compute.parse(RTX_5090),))
    assert "cu130" in blackwell_on_r570.reason and "580" in blackwell_on_r570.reason
    mixed = choose(CudaVersion.parse(R580), (Compute.parse(GTX_1080), Compute.parse(RTX_5090)))
    assert "6.1 (Pascal) runs only on cu126" in mixed.reason and "CUDA_VISIBLE_DEVICES" in mixed.reason
    pascal = choose(CudaVersion.parse(R580), (Compute.parse(GTX_1080),))
    assert "cu130 has no kernels for compute 6.1 (Pascal)" in pascal.reason
    old = choose(CudaVersion.parse(R470), ())
    assert "525" in old.reason and "CUDA 11.4" in old.reason
    compat = choose(CudaVersion.parse(R535), (Compute.parse(RTX_3090),))
    assert compat.minor_compat and "minor-version compatibility" in compat.reason
    assert not choose(CudaVersion.parse(R560), ()).minor_compat


def test_a_kernel_runs_on_later_minors_of_its_major_only():
    cu126 = next(b for b in CUDA_BUILDS if b.tag == "cu126")
    assert cu126.runs_gpu(Compute(6, 1)) and cu126.runs_gpu(Compute(8, 9)) and cu126.runs_gpu(Compute(5, 2))
    assert not cu126.runs_gpu(Compute(12, 0)) and not cu126.runs_gpu(Compute(3, 7))
    cu130 = next(b for b in CUDA_BUILDS if b.tag == "cu130")
    assert cu130.runs_gpu(Compute(12, 1)) and not cu130.runs_gpu(Compute(7, 0))


def test_table_matches_the_pin_and_is_newest_first():
    assert TORCH_VERSION in BUILDS_BY_TORCH and CUDA_BUILDS is BUILDS_BY_TORCH[TORCH_VERSION]
    assert [b.tag for b in CUDA_BUILDS] == ["cu132", "cu130", "cu126"]  # pytorch PR #194367
    versions = [b.cuda for b in CUDA_BUILDS]
    assert versions == sorted(versions, reverse=True)
    for b in CUDA_BUILDS:
        assert list(b.kernels) == sorted(b.kernels) and b.floor.major == b.cuda.major and b.floor <= b.cuda


def test_cu130_kernels_match_the_installed_torch():
    """This machine's torch 2.14.1 is the Linux cu130 wheel: its compiled architectures are the table's."""
    torch = pytest.importorskip("torch")
    if torch.version.cuda != "13.0":
        pytest.skip(f"torch here is built for CUDA {torch.version.cuda}, not 13.0")
    arches = torch.cuda.get_arch_list()
    cu130 = next(b for b in CUDA_BUILDS if b.tag == "cu130")
    assert [a for a in arches if a.startswith("sm_")] == [f"sm_{k.major}{k.minor}" for k in cu130.kernels]


def test_no_driver_gets_the_cpu_build():
    build = choose_build(None)
    assert build is CPU_BUILD
    assert build.index_url == "https://download.pytorch.org/whl/cpu" and not build.uses_gpu


def test_cuda_versions_parse_and_order():
    assert CudaVersion.parse("12.8.1") == CudaVersion(12, 8)
    assert CudaVersion.from_nvml(13000) == CudaVersion(13, 0)
    assert CudaVersion.from_nvml(12060) == CudaVersion(12, 6)
    assert CudaVersion(12, 10) > CudaVersion(12, 9)  # numeric, not textual
    for bad in ("", "twelve", "12", "12.x"):
        with pytest.raises(ValueError):
            CudaVersion.parse(bad)


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
    "seam, compute, code, tag",
    [("13.1", "", 0, "cu130"), ("13.0", "6.1", 0, "cu126"), ("12.8", "", 0, "cu126"), ("none", "", 0, "cpu"),
     ("12.8", "12.0", 4, "cpu"), ("13.0", "6.1,12.0", 12, "cpu"), ("11.4", "", 4, "cpu")],
)
def test_choose_command(tmp_path, seam, compute, code, tag):
    env = {**os.environ, driver.OVERRIDE_ENV: seam, driver.COMPUTE_ENV: compute}
    proc = subprocess.run(
        [sys.executable, "-m", "ddpstudio.bootstrap", "choose", "--root", str(tmp_path), "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert proc.returncode == code, proc.stderr
    out = json.loads(proc.stdout)
    assert out["build"] == tag and out["reason"] and out["gpu_build_possible"] is (code == 0)
    assert list(tmp_path.iterdir()) == []  # "choose" changes nothing
    assert psutil.Process().children(recursive=True) == []


def test_choose_flags_and_plain_output(tmp_path, monkeypatch):
    monkeypatch.delenv(driver.OVERRIDE_ENV, raising=False)
    monkeypatch.delenv(driver.COMPUTE_ENV, raising=False)
    run = lambda *a: subprocess.run([sys.executable, "-m", "ddpstudio.bootstrap", "choose", *a], capture_output=True,
                                    text=True, timeout=60, cwd=tmp_path)
    proc = run("--driver-cuda", "12.6", "--compute", "8.9")
    assert proc.returncode == 0 and proc.stdout.startswith("cu126  (https://download.pytorch.org/whl/cu126)")
    assert "compute 8.9 (Ada)" in proc.stdout
    bare = run("--json")  # no flags: NVML, which finds no driver here
    if json.loads(bare.stdout)["driver"]["state"].startswith("not available"):
        assert json.loads(bare.stdout)["build"] == "cpu" and "No NVIDIA driver" in json.loads(bare.stdout)["reason"]
    for bad in (["--compute", "8"], ["--driver-cuda", "twelve"]):
        proc = run(*bad)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("python -m ddpstudio.bootstrap: error: not a")
    assert list(tmp_path.iterdir()) == []
    assert psutil.Process().children(recursive=True) == []


def test_nvml_calls_declare_their_types():
    """Every NVML function the bootstrap calls gets argtypes/restype (a wrong width corrupts the stack on Windows)."""
    import ctypes

    class Fake:
        def __init__(self):
            for name in ("nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetCudaComputeCapability",
                         "nvmlDeviceGetName", "nvmlSystemGetDriverVersion"):
                setattr(self, name, ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0))

    fake = Fake()
    driver._declare(fake)
    for name in vars(fake):
        assert getattr(fake, name).restype is ctypes.c_int and getattr(fake, name).argtypes, name


class FakeNvml:
    """NVML's device calls as a driver with these GPUs answers them (the hardware edge)."""

    def __init__(self, gpus: list[tuple[str, int, int]], broken_index: int | None = None) -> None:
        self.gpus, self.broken_index = gpus, broken_index

    def nvmlDeviceGetCount_v2(self, count):  # noqa: N802 - NVML's names
        count.contents.value = len(self.gpus)
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index, handle):  # noqa: N802
        handle.contents.value = 1000 + index
        return 0

    def nvmlDeviceGetCudaComputeCapability(self, handle, major, minor):  # noqa: N802
        index = handle.value - 1000
        if index == self.broken_index:
            return 3  # NVML_ERROR_NOT_SUPPORTED
        major.contents.value, minor.contents.value = self.gpus[index][1:]
        return 0

    def nvmlDeviceGetName(self, handle, buffer, size):  # noqa: N802
        buffer.value = self.gpus[handle.value - 1000][0].encode()
        return 0


def test_every_gpus_compute_capability_is_read():
    gpus, names = driver._read_gpus(FakeNvml([("NVIDIA GeForce GTX 1080", 6, 1), ("NVIDIA GeForce RTX 4090", 8, 9)]))
    assert gpus == (Compute(6, 1), Compute(8, 9)) and names == ("NVIDIA GeForce GTX 1080", "NVIDIA GeForce RTX 4090")
    assert choose(CudaVersion.parse(R580), gpus).build.tag == "cu126"
    # One unreadable GPU: unknown, and the driver alone decides (never a guess from the others).
    assert driver._read_gpus(FakeNvml([("A", 8, 9), ("B", 6, 1)], broken_index=1)) == ((), ())
    info = driver.DriverInfo(CudaVersion(13, 0), "580.65", "ok", gpus, names)
    assert "NVIDIA GeForce GTX 1080 (compute 6.1)" in info.describe()
