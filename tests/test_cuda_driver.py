"""``ddpstudio run`` plans without importing torch where no CUDA device can exist (core/gpu/cudadriver.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ddpstudio.core.gpu import FakeGpuSource, Inventory
from ddpstudio.core.gpu import cudadriver
from ddpstudio.core.gpu.cudadriver import NoCudaMachine, planning_machine

# The driver's facts as NVML gives them on a machine without an NVIDIA driver; torch would decide.
NO_NVIDIA = FakeGpuSource(gpus=[], nvml_state="not available: no NVML", driver_version=None, cuda_driver_version=None,
                          torch_sees_gpus=False)
A6000 = {"name": "NVIDIA RTX A6000", "total_memory_mb": 49140}
PLAN_IN_A_CHILD = """
import sys
from ddpstudio.cli.main import _parser
from ddpstudio.cli.run import plan_or_exit
from ddpstudio.core.platform import current
plan = plan_or_exit(_parser().parse_args(["run", "--model", "mlp", "--image-size", "8"]), current())
print(plan.device, plan.world_size, plan.backend, "torch" in sys.modules)
"""


def _driver_loads() -> bool:
    import ctypes

    try:
        ctypes.CDLL(cudadriver.DRIVER_LIBRARY)
    except OSError:
        return False
    return True


@pytest.mark.skipif(_driver_loads(), reason="this machine has the NVIDIA driver's CUDA library")
def test_without_the_driver_library_the_cli_plans_a_cpu_run_and_never_imports_torch(studio_home):
    out = subprocess.run([sys.executable, "-c", PLAN_IN_A_CHILD], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, check=True).stdout.split()
    assert out == ["cpu", "2", "gloo", "False"]
    machine = planning_machine(NO_NVIDIA)
    assert isinstance(machine, NoCudaMachine) and (machine.gpu_count, machine.cuda_available) == (0, False)
    assert machine.why.startswith("the NVIDIA driver's CUDA library cannot be loaded (")


def test_a_loadable_driver_library_or_gpus_the_driver_sees_leave_the_answer_to_torch(monkeypatch):
    monkeypatch.setattr(cudadriver, "DRIVER_LIBRARY", "libc.so.6" if sys.platform != "win32" else "kernel32.dll")
    asked = planning_machine(NO_NVIDIA)  # a driver library that loads (here a stand-in): torch is asked
    assert isinstance(asked, Inventory) and asked.torch_version
    monkeypatch.setattr(cudadriver, "DRIVER_LIBRARY", "no-such-driver-library.so")
    assert isinstance(planning_machine(NO_NVIDIA), NoCudaMachine)
    seen = planning_machine(FakeGpuSource(gpus=[A6000], torch_sees_gpus=False))  # NVML sees a GPU: torch decides
    assert isinstance(seen, Inventory) and len(seen.driver_gpus) == 1
    machine = planning_machine(FakeGpuSource(gpus=[A6000] * 2))  # the test seam's GPUs stand in for torch's
    assert isinstance(machine, Inventory) and machine.gpu_count == 2 and machine.cuda_available
