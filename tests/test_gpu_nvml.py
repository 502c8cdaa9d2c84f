"""NvmlSource: the real no-driver path on this machine, and driver quirks through a fake pynvml."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ddpstudio.core.gpu import NVML_OK, NvmlSource
from ddpstudio.core.gpu.nvml import cuda_version_pair

MIB = 1024 * 1024


def _real_nvml_works() -> bool:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


REAL_DRIVER = _real_nvml_works()


@pytest.mark.skipif(REAL_DRIVER, reason="this machine has an NVIDIA driver")
def test_real_nvml_without_driver_is_a_state_not_an_error():
    source = NvmlSource()  # the real pynvml: nvmlInit() raises NVMLError_LibraryNotFound here
    assert source.state.startswith("not available: ")
    assert "driver" in source.state
    driver = source.inventory()
    assert driver.nvml_state == source.state
    assert driver.gpus == () and driver.driver_version is None and driver.cuda_driver_version is None
    assert source.sample() == () and source.sample({1, 2}) == ()
    source.close()
    assert source.state.startswith("not available: ")  # starts (and fails) again, quietly


@pytest.mark.skipif(not REAL_DRIVER, reason="needs an NVIDIA driver")
def test_real_nvml_with_driver_reads_every_device():
    source = NvmlSource()
    try:
        assert source.state == NVML_OK
        driver = source.inventory()
        assert driver.driver_version and driver.cuda_driver_version
        samples = source.sample()
        assert [s.index for s in samples] == [g.index for g in driver.gpus]
        assert all(s.memory_total_mb for s in samples)
    finally:
        source.close()


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's own naming
    pass


class NVMLError_DriverNotLoaded(NVMLError):  # noqa: N801
    pass


def fake_nvml(**overrides):
    """A pynvml-like module with two GPUs; keyword arguments replace its functions."""
    calls = {"init": 0, "shutdown": 0}

    def init():
        calls["init"] += 1

    def shutdown():
        calls["shutdown"] += 1

    functions = dict(
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=init,
        nvmlShutdown=shutdown,
        nvmlSystemGetDriverVersion=lambda: "555.85",
        nvmlSystemGetCudaDriverVersion=lambda: 12050,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: f"handle{i}",
        nvmlDeviceGetName=lambda h: b"NVIDIA GeForce RTX 4090" if h == "handle0" else "NVIDIA RTX A4000",
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}",
        nvmlDeviceGetCudaComputeCapability=lambda h: (8, 9) if h == "handle0" else (8, 6),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=24564 * MIB, used=8000 * MIB, free=0),
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=97, memory=40),
        nvmlDeviceGetTemperature=lambda h, sensor: 61,
        nvmlDeviceGetPowerUsage=lambda h: 250_500,
        # WDDM: the rank is listed, its memory is not (pynvml gives None for N/A).
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=4242, usedGpuMemory=None)],
        nvmlDeviceGetGraphicsRunningProcesses=lambda h: [
            SimpleNamespace(pid=4242, usedGpuMemory=None),
            SimpleNamespace(pid=7, usedGpuMemory=512 * MIB),
        ],
    )
    functions.update(overrides)
    return SimpleNamespace(**functions), calls


def test_fake_driver_inventory_and_sample_read_every_value():
    module, calls = fake_nvml()
    source = NvmlSource(nvml=module)
    assert calls["init"] == 0  # lazy: nothing happens before first use
    driver = source.inventory()
    assert calls["init"] == 1
    assert driver.nvml_state == NVML_OK
    assert driver.driver_version == "555.85"
    assert driver.cuda_driver_version == (12, 5)
    assert [(g.index, g.name, g.compute_capability, g.uuid) for g in driver.gpus] == [
        (0, "NVIDIA GeForce RTX 4090", "8.9", "GPU-handle0"),
        (1, "NVIDIA RTX A4000", "8.6", "GPU-handle1"),
    ]
    first, second = source.sample()
    assert (first.utilization_pct, first.memory_used_mb, first.memory_total_mb) == (97.0, 8000.0, 24564.0)
    assert (first.temperature_c, first.power_w) == (61.0, 250.5)
    assert [(p.pid, p.used_mb) for p in first.processes] == [(7, 512.0), (4242, None)]
    assert second.index == 1 and second.uuid == "GPU-handle1"
    source.sample()
    assert calls["init"] == 1  # started once
    source.close()
    assert calls["shutdown"] == 1


def test_a_field_the_driver_refuses_is_none_and_the_rest_still_count():
    def temperature(handle, sensor):
        raise NVMLError_NotSupported("Not Supported")

    def power(handle):
        raise NVMLError("Unknown Error")

    module, _ = fake_nvml(nvmlDeviceGetTemperature=temperature, nvmlDeviceGetPowerUsage=power)
    del module.nvmlDeviceGetGraphicsRunningProcesses  # an old pynvml without the function
    samples = NvmlSource(nvml=module).sample()
    assert len(samples) == 2
    for sample in samples:
        assert sample.temperature_c is None and sample.power_w is None
        assert sample.utilization_pct == 97.0 and sample.memory_used_mb == 8000.0
        assert [(p.pid, p.used_mb) for p in sample.processes] == [(4242, None)]


def test_pids_filter_the_process_lists():
    module, _ = fake_nvml()
    source = NvmlSource(nvml=module)
    assert [p.pid for p in source.sample({4242})[0].processes] == [4242]
    assert source.sample(set())[0].processes == ()
    assert len(source.sample(None)[0].processes) == 2


def test_driver_not_loaded_is_said_in_plain_words():
    def init():
        raise NVMLError_DriverNotLoaded("Driver Not Loaded")

    module, _ = fake_nvml(nvmlInit=init)
    source = NvmlSource(nvml=module)
    assert source.state == "not available: the NVIDIA driver is installed but not loaded"
    assert source.inventory().gpus == () and source.sample() == ()


def test_cuda_driver_version_pairs():
    assert cuda_version_pair(12040) == (12, 4)
    assert cuda_version_pair(11080) == (11, 8)
    assert cuda_version_pair(13000) == (13, 0)
