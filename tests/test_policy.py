"""The policy table, through the platform and GPU seams: Windows, Linux + CUDA, CPU only."""

import pytest

from ddpstudio.core.gpu import FakeGpuSource, detect_inventory
from ddpstudio.core.plan import RecipeSpec, ScriptSpec
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.rendezvous import asciipath
from ddpstudio.core.policy import (PolicyError, Request, build_plan, choose_backend, choose_store,
                                   choose_world_size, effective_batch, loopback_interface)

GPU = {"name": "NVIDIA RTX 4090", "total_memory_mb": 24564, "compute_capability": "8.9"}
LINUX_IFACES = {"lo": ["127.0.0.1", "::1"], "eth0": ["192.0.2.2"]}
WINDOWS_IFACES = {"Ethernet": ["192.168.1.20"], "Loopback Pseudo-Interface 1": ["127.0.0.1", "::1"]}


@pytest.fixture
def two_gpus():
    return detect_inventory(FakeGpuSource([GPU, GPU]))


@pytest.fixture
def cpu_only():
    return detect_inventory()  # the real machine: no driver, no CUDA


def test_this_machine_is_cpu_only(cpu_only):
    assert cpu_only.cpu_mode and cpu_only.gpu_count == 0


@pytest.mark.parametrize("platform, machine, backend, words", [
    (WINDOWS, "two_gpus", "gloo", "NCCL is not built into PyTorch for Windows"),
    (WINDOWS, "cpu_only", "gloo", "NCCL is not built into PyTorch for Windows"),
    (LINUX, "two_gpus", "nccl", "fastest backend for CUDA"),
    (LINUX, "cpu_only", "gloo", "no CUDA GPU"),
])
def test_backend_table(platform, machine, backend, words, request):
    decision = choose_backend(platform, request.getfixturevalue(machine))
    assert decision.value == backend and words in decision.reason


def test_impossible_overrides_are_rejected(two_gpus, cpu_only):
    with pytest.raises(PolicyError, match="NCCL does not exist in PyTorch for Windows") as err:
        choose_backend(WINDOWS, two_gpus, "nccl")
    assert err.value.field == "backend"
    with pytest.raises(PolicyError, match="NCCL needs CUDA GPUs"):
        choose_backend(LINUX, cpu_only, "nccl")
    assert choose_backend(LINUX, two_gpus, "gloo").value == "gloo"


def test_world_size_defaults_and_limits(two_gpus, cpu_only):
    assert choose_world_size(two_gpus, None, "cuda").value == 2
    assert choose_world_size(cpu_only, None, "cpu").value == 2
    assert choose_world_size(cpu_only, 3, "cpu").value == 3
    with pytest.raises(PolicyError, match="asked for 4 ranks but this machine has 2 GPUs"):
        choose_world_size(two_gpus, 4, "cuda")
    with pytest.raises(PolicyError, match="at least 1"):
        choose_world_size(cpu_only, 0, "cpu")


def test_store_choices():
    assert choose_store(WINDOWS, "auto", None).value == "file"
    assert "libuv" in choose_store(WINDOWS, "auto", None).reason
    assert choose_store(LINUX, "auto", None).value == "file"
    assert choose_store(LINUX, "tcp", None).value == "tcp"
    assert choose_store(LINUX, "auto", "env").value == "tcp"
    with pytest.raises(PolicyError, match="env://"):
        choose_store(LINUX, "file", "env")


def test_windows_plan_uses_gloo_a_fresh_filestore_and_the_loopback_adapter(two_gpus, monkeypatch, tmp_path):
    # torch's FileStore cannot open a non-ASCII path on Windows: the store goes to the folder's short name.
    monkeypatch.chdir(tmp_path)  # on Linux the Windows-style home below is a relative folder name
    monkeypatch.setenv("DDPSTUDIO_HOME", r"C:\Users\Jürgen\AppData\Local\DDPStudio")
    monkeypatch.setattr(asciipath, "short_path_name", lambda p: p.replace("Jürgen", "JRGEN~1"))
    plan = build_plan(Request(recipe=RecipeSpec()), WINDOWS, two_gpus, interfaces=WINDOWS_IFACES)
    assert (plan.backend, plan.device, plan.store, plan.world_size) == ("gloo", "cuda", "file", 2)
    assert plan.store_path.startswith("C:\\Users\\JRGEN~1\\AppData\\Local\\DDPStudio")
    assert plan.store_path.isascii() and plan.init_method.isascii()
    assert plan.init_method.startswith("file:///C:/Users/JRGEN~1/AppData/Local/DDPStudio/stores/")
    assert any("short name" in r for r in plan.reasons)
    assert plan.env["GLOO_SOCKET_IFNAME"] == "Loopback Pseudo-Interface 1"
    other = build_plan(Request(recipe=RecipeSpec()), WINDOWS, two_gpus, interfaces=WINDOWS_IFACES)
    assert other.store_path != plan.store_path  # a fresh file for every run


def test_windows_tcp_switches_libuv_off(cpu_only):
    plan = build_plan(Request(store="tcp", port=29511, recipe=RecipeSpec()), WINDOWS, cpu_only,
                      interfaces=WINDOWS_IFACES)
    assert plan.init_method == "tcp://127.0.0.1:29511?use_libuv=0"
    assert plan.env["USE_LIBUV"] == "0"
    linux = build_plan(Request(store="tcp", port=29511, recipe=RecipeSpec()), LINUX, cpu_only,
                       interfaces=LINUX_IFACES)
    assert linux.init_method == "tcp://127.0.0.1:29511" and "USE_LIBUV" not in linux.env


def test_windows_fixed_store_path_from_the_blog(cpu_only):
    plan = build_plan(Request(store_path="file:///D:\\pg", recipe=RecipeSpec()), WINDOWS, cpu_only,
                      interfaces=WINDOWS_IFACES)
    assert plan.store_is_fixed and plan.store_path == "D:\\pg"
    assert plan.init_method == "file:///D:/pg"


def test_linux_cuda_plan_is_nccl_one_rank_per_gpu(two_gpus):
    plan = build_plan(Request(recipe=RecipeSpec()), LINUX, two_gpus, interfaces=LINUX_IFACES)
    assert (plan.backend, plan.device, plan.world_size) == ("nccl", "cuda", 2)
    assert "GLOO_SOCKET_IFNAME" not in plan.env


def test_cpu_plan_is_two_gloo_ranks_pinned_to_lo(cpu_only):
    plan = build_plan(Request(recipe=RecipeSpec(batch_size=16)), LINUX, cpu_only, interfaces=LINUX_IFACES)
    assert (plan.backend, plan.device, plan.world_size) == ("gloo", "cpu", 2)
    assert plan.env["GLOO_SOCKET_IFNAME"] == "lo"
    assert plan.effective_batch == 32 and any("effective batch 32" in r for r in plan.reasons)


def test_env_style_scripts_get_env_init_and_a_port(cpu_only):
    plan = build_plan(Request(script=ScriptSpec(path="train.py", style="env")), LINUX, cpu_only,
                      interfaces=LINUX_IFACES)
    assert plan.init_method == "env://" and plan.master_port


def test_effective_batch_split_or_per_rank():
    assert effective_batch(64, 4, "per-rank") == (64, 256)
    assert effective_batch(256, 4, "split") == (64, 256)
    assert effective_batch(100, 3, "split") == (33, 99)
    with pytest.raises(PolicyError, match="cannot be split over 4 ranks"):
        effective_batch(2, 4, "split")


def test_scaled_learning_rate_is_reported(cpu_only):
    plan = build_plan(Request(world_size=4, recipe=RecipeSpec(lr=0.1, scale_lr=True)), LINUX, cpu_only,
                      interfaces=LINUX_IFACES)
    assert plan.lr == pytest.approx(0.4)
    assert any("learning rate scaled to 0.4" in r for r in plan.reasons)


def test_loopback_interface_lookup():
    assert loopback_interface(LINUX_IFACES) == "lo"
    assert loopback_interface({"eth0": ["10.0.0.2"]}) is None
    assert loopback_interface() is not None  # this machine has one
