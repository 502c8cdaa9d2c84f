"""detect_inventory on this real machine (its GPUs, or none), with fake GPUs, and through the env-var seam."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pytest
import torch

from ddpstudio.core.gpu import (
    FAKE_GPUS_ENV,
    FakeGpuSource,
    GpuSample,
    NvmlSource,
    detect_inventory,
    get_source,
    set_source,
)
from tests import machine

TWO_GPUS = {
    "driver_version": "551.86",
    "cuda_driver_version": [12, 4],
    "gpus": [
        {"name": "NVIDIA GeForce RTX 4090", "total_memory_mb": 24564, "compute_capability": "8.9",
         "utilization_pct": 97, "memory_used_mb": 20100, "temperature_c": 71, "power_w": 410.5,
         "processes": [{"pid": 4242, "used_mb": None}]},
        {"name": "NVIDIA GeForce RTX 3090", "total_memory_mb": 24576, "compute_capability": "8.6"},
    ],
}


@pytest.fixture(autouse=True)
def default_source(monkeypatch):
    """Each test starts from the real default source and leaves it so."""
    monkeypatch.delenv(FAKE_GPUS_ENV, raising=False)
    set_source(None)
    yield
    set_source(None)


def no_child_processes_left() -> bool:
    return not psutil.Process().children(recursive=True)


@pytest.mark.real_gpus
def test_this_machine_through_the_real_nvml_and_torch():
    """The GPU path where NVML and torch see GPUs, the CPU path ("not available", cpu mode) where they do not."""
    assert isinstance(get_source(), NvmlSource)
    inventory = detect_inventory()
    nvml, torch_names = machine.nvml_answer(), machine.torch_gpus()
    if nvml.started:
        assert inventory.nvml_state == "ok"
        assert inventory.driver_version == nvml.driver_version and inventory.cuda_driver_version is not None
    else:
        assert inventory.nvml_state.startswith("not available")
        assert inventory.driver_version is None and inventory.cuda_driver_version is None
    assert tuple(g.name for g in inventory.driver_gpus) == nvml.names
    assert tuple(g.name for g in inventory.gpus) == torch_names
    assert inventory.cpu_mode is (not torch_names) and inventory.cuda_available is bool(torch_names)
    assert all(g.uuid and g.uuid.startswith(("GPU-", "MIG-")) for g in inventory.gpus)  # joins NVML's samples
    assert inventory.torch_version == torch.__version__
    assert inventory.torch_cuda_version == torch.version.cuda
    data = json.loads(json.dumps(inventory.to_dict()))
    assert data["cpu_mode"] is inventory.cpu_mode and data["gpu_count"] == len(torch_names)
    assert [g["name"] for g in data["gpus"]] == list(torch_names) and data["nvml_state"] == inventory.nvml_state


def test_fake_source_models_a_machine_with_two_gpus():
    inventory = detect_inventory(FakeGpuSource.from_dict(TWO_GPUS))
    assert inventory.gpu_count == 2
    assert inventory.cpu_mode is False and inventory.cuda_available is True
    assert inventory.nvml_state == "ok"
    assert inventory.driver_version == "551.86" and inventory.cuda_driver_version == (12, 4)
    assert [g.name for g in inventory.gpus] == ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"]
    assert inventory.gpus[0].compute_capability == "8.9" and inventory.gpus[1].total_memory_mb == 24576
    data = json.loads(json.dumps(inventory.to_dict()))
    assert data["cuda_driver_version"] == [12, 4] and data["gpu_count"] == 2
    assert data["gpus"][0]["name"] == "NVIDIA GeForce RTX 4090"


def test_set_source_is_what_get_source_and_detect_inventory_use():
    fake = FakeGpuSource.from_dict(TWO_GPUS)
    set_source(fake)
    assert get_source() is fake
    assert detect_inventory().gpu_count == 2
    set_source(None)
    assert isinstance(get_source(), NvmlSource)


def test_env_var_seam_shows_fake_gpus_to_a_subprocess_without_importing_torch(tmp_path, monkeypatch):
    """The fake devices stand in for torch's, so torch's build is read from its version.py: the CLI's
    planning under the seam skips the 3-4 s of CPU an import costs (the GPU tests start it dozens of times)."""
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(TWO_GPUS), encoding="utf-8")
    monkeypatch.setenv(FAKE_GPUS_ENV, str(path))
    code = ("import json, sys; from ddpstudio.core.gpu import detect_inventory; "
            "print(json.dumps(detect_inventory().to_dict())); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    shown, imported = done.stdout.splitlines()
    data = json.loads(shown)
    assert data["gpu_count"] == 2 and data["cpu_mode"] is False
    assert data["driver_version"] == "551.86" and data["cuda_driver_version"] == [12, 4]
    assert data["torch_version"] == torch.__version__ and data["torch_cuda_version"] == torch.version.cuda
    assert imported == "False"
    assert no_child_processes_left()


def test_env_var_seam_in_process_and_a_bad_file(tmp_path, monkeypatch):
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(TWO_GPUS), encoding="utf-8")
    monkeypatch.setenv(FAKE_GPUS_ENV, str(path))
    assert isinstance(get_source(), FakeGpuSource)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    for bad in (broken, tmp_path / "missing.json"):
        monkeypatch.setenv(FAKE_GPUS_ENV, str(bad))
        with pytest.raises(ValueError, match=FAKE_GPUS_ENV):
            get_source()


@pytest.mark.slow
def test_cpu_only_torch_on_a_gpu_machine_is_cpu_mode_with_a_note(tmp_path, monkeypatch):
    """The driver sees a GPU (the seam) and torch sees none: CUDA_VISIBLE_DEVICES="" hides every device
    from torch in a fresh process, on a GPU machine as here (it must be set before CUDA starts)."""
    path = tmp_path / "one-gpu.json"
    path.write_text(json.dumps({"gpus": TWO_GPUS["gpus"][:1], "torch_sees_gpus": False}), encoding="utf-8")
    monkeypatch.setenv(FAKE_GPUS_ENV, str(path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code = ("import json; from ddpstudio.core.gpu import detect_inventory; "
            "print(json.dumps(detect_inventory().to_dict()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    inventory = json.loads(done.stdout)
    assert inventory["cpu_mode"] is True and inventory["gpu_count"] == 0 and inventory["cuda_available"] is False
    assert [g["name"] for g in inventory["driver_gpus"]] == ["NVIDIA GeForce RTX 4090"]
    assert inventory["notes"] and "1 NVIDIA GPU" in inventory["notes"][0]
    assert no_child_processes_left()


def test_samples_join_the_inventory_by_uuid():
    source = FakeGpuSource.from_dict(TWO_GPUS)
    inventory = detect_inventory(source)
    first, second = source.sample()
    assert inventory.gpu_for(second) is inventory.gpus[1]
    stranger = GpuSample(0, "other", None, None, None, None, None, uuid="GPU-elsewhere")
    assert inventory.gpu_for(stranger) is None


def test_importing_the_package_loads_neither_torch_nor_nvml_nor_qt():
    code = ("import sys, ddpstudio.core.gpu; "
            "print(sorted(m for m in ('torch', 'pynvml', 'PySide6') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert no_child_processes_left()


def test_a_typo_in_fake_gpu_data_is_an_error_not_a_missing_value():
    with pytest.raises(ValueError, match="utilisation_pct"):
        FakeGpuSource(gpus=[{"name": "NVIDIA T4", "total_memory_mb": 15360, "utilisation_pct": 50}])
    with pytest.raises(TypeError):
        FakeGpuSource.from_dict({"gpus": [], "driver": "551.86"})
