"""The exchange choice (auto/native/staged, fp16) through the policy seams, and what ranks are told."""

from __future__ import annotations

import os

import pytest

from ddpstudio.core.exchange.choice import (COMPRESSION_ENV, EXCHANGE_ENV, ExchangeError, GradExchange,
                                            choose_compression, choose_exchange)
from ddpstudio.core.gpu import FakeGpuSource, detect_inventory
from ddpstudio.core.launch.commands import rank_env, rank_helper_dir
from ddpstudio.core.plan import RecipeSpec, ScriptSpec
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.policy import PolicyError, Request, build_plan

GPU = {"name": "NVIDIA RTX 4090", "total_memory_mb": 24564, "compute_capability": "8.9"}
IFACES = {"lo": ["127.0.0.1"]}


@pytest.fixture
def two_gpus():
    return detect_inventory(FakeGpuSource([GPU, GPU]))


@pytest.mark.parametrize("outcome, mode, words", [
    ("crashes", "staged", "crashed"),
    ("wrong", "staged", "wrong result"),
    (None, "staged", "not been checked"),
    ("hangs", "staged", "'hangs'"),
    ("native", "native", "correctly on this machine"),
])
def test_auto_on_gloo_cuda_follows_the_probe(outcome, mode, words):
    decision = choose_exchange("auto", "gloo", "cuda", outcome)
    assert decision.value == mode and words in decision.reason
    if mode == "staged":
        assert "pytorch #186535" in decision.reason


@pytest.mark.parametrize("backend, device, words", [("gloo", "cpu", "on the CPU"), ("nccl", "cuda", "NCCL")])
def test_auto_is_native_where_the_trap_cannot_happen(backend, device, words):
    decision = choose_exchange("auto", backend, device, "crashes")
    assert decision.value == GradExchange.NATIVE and words in decision.reason


def test_chosen_modes_say_so_and_native_warns_when_the_probe_crashed():
    assert choose_exchange("staged", "gloo", "cpu", None).reason.startswith("gradients staged")
    warned = choose_exchange("native", "gloo", "cuda", "crashes")
    assert warned.value == "native" and "staged avoids it" in warned.reason
    assert "avoids" not in choose_exchange("native", "gloo", "cuda", "native").reason


def test_staged_needs_gloo_and_unknown_values_are_refused():
    with pytest.raises(ExchangeError, match="gloo backend") as err:
        choose_exchange("staged", "nccl", "cuda", None)
    assert err.value.field == "grad_exchange"
    with pytest.raises(ExchangeError, match="choose auto, native, staged"):
        choose_exchange("gpu", "gloo", "cpu", None)
    with pytest.raises(ExchangeError, match="choose none or fp16") as err:
        choose_compression("int8")
    assert err.value.field == "grad_compression"
    assert choose_compression("none").reason == "" and "approximate" in choose_compression("fp16").reason


@pytest.mark.parametrize("outcome, mode", [("crashes", "staged"), ("native", "native")])
def test_windows_gpu_plan_takes_the_injected_probe_outcome(two_gpus, outcome, mode):
    asked = []

    def probe():
        asked.append(True)
        return outcome

    request = Request(recipe=RecipeSpec(), store="tcp", port=29511)  # no Windows store path to make up
    plan = build_plan(request, WINDOWS, two_gpus, IFACES, probe=probe)
    assert (plan.backend, plan.device, plan.grad_exchange, plan.grad_compression) == ("gloo", "cuda", mode, "none")
    assert asked == [True]
    assert any(r.startswith(("gradients staged", "native gradient exchange")) for r in plan.reasons)


def test_probe_is_not_asked_when_it_cannot_matter(two_gpus):
    def probe():
        raise AssertionError("the probe only matters for Gloo on CUDA")

    assert build_plan(Request(recipe=RecipeSpec()), LINUX, two_gpus, IFACES, probe=probe).grad_exchange == "native"
    cpu = build_plan(Request(recipe=RecipeSpec(), grad_compression="fp16"), LINUX, detect_inventory(), IFACES,
                     probe=probe)
    assert (cpu.grad_exchange, cpu.grad_compression) == ("native", "fp16")
    assert any("float16" in r for r in cpu.reasons)


def test_policy_turns_exchange_errors_into_policy_errors(two_gpus):
    with pytest.raises(PolicyError) as err:
        build_plan(Request(recipe=RecipeSpec(), backend="nccl", grad_exchange="staged"), LINUX, two_gpus, IFACES)
    assert err.value.field == "grad_exchange"


def test_ranks_get_the_mode_and_scripts_get_the_helper_first_on_their_path(tmp_path):
    script = ScriptSpec(path=str(tmp_path / "train.py"), style="env")
    base = {"PYTHONPATH": "/users/own/path"}
    plan = build_plan(Request(script=script, grad_exchange="staged"), LINUX, detect_inventory(), IFACES)
    env = rank_env(plan, 1, str(tmp_path), base)
    assert (env[EXCHANGE_ENV], env[COMPRESSION_ENV]) == ("staged", "none")
    assert env["PYTHONPATH"] == rank_helper_dir() + os.pathsep + "/users/own/path"
    assert sorted(p.name for p in os.scandir(rank_helper_dir()) if p.name != "__pycache__") == ["sitecustomize.py"]

    off = build_plan(Request(script=script, rank_helper=False), LINUX, detect_inventory(), IFACES)
    assert rank_env(off, 0, str(tmp_path), base)["PYTHONPATH"] == "/users/own/path"
    recipe = build_plan(Request(recipe=RecipeSpec()), LINUX, detect_inventory(), IFACES)
    assert "PYTHONPATH" not in rank_env(recipe, 0, str(tmp_path), {})
    assert rank_env(recipe, 0, str(tmp_path), {})[EXCHANGE_ENV] == "native"


@pytest.mark.slow
@pytest.mark.parametrize("fake_gpus, mode, words", [(False, "native", "on the CPU"), (True, "native", "NCCL")])
def test_doctor_shows_the_exchange_choice_with_its_reason(tmp_path, monkeypatch, fake_gpus, mode, words):
    import json

    from tests.studio import ddpstudio

    if fake_gpus:
        gpus = tmp_path / "gpus.json"
        gpus.write_text(json.dumps({"gpus": [GPU, GPU]}))
        monkeypatch.setenv("DDPSTUDIO_FAKE_GPUS", str(gpus))
    res = ddpstudio("doctor", "--json", timeout=120)
    assert res.returncode == 0, res.stderr
    choice = json.loads(res.stdout)["choice"]
    assert choice["grad_exchange"] == mode and words in choice["grad_exchange_reason"]
