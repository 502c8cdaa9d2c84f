"""``ddpstudio doctor`` reports the Gloo-on-CUDA probe: the real probe on this machine, cache, and a child that crashes."""

from __future__ import annotations

import json

import pytest

from ddpstudio.core.exchange import probe
from tests import machine
from tests.studio import ddpstudio
from tests.test_exchange_probe import ONE_GPU, child


@pytest.mark.slow
@pytest.mark.real_gpus
def test_doctor_json_probes_once_then_reads_the_cache():
    """What the probe finds on this machine: "native" on a GPU (Linux), "not applicable" without one."""
    gpus = machine.torch_gpus()
    first = ddpstudio("doctor", "--json", timeout=180)
    assert first.returncode == 0, first.stderr
    fact = json.loads(first.stdout)["gloo_cuda_all_reduce"]
    assert fact["outcome"] == ("native" if gpus else "not applicable") and fact["from_cache"] is False
    assert fact["sentence"] == ("Gloo all-reduces GPU tensors correctly here: gradients stay on the GPU" if gpus
                                else "No CUDA GPU: gradients are all-reduced on the CPU anyway")
    assert [g["name"] for g in fact["gpus"]] == list(gpus)
    assert {"detail", "gpus", "key", "t", "duration_s", "exit"} <= set(fact)
    again = json.loads(ddpstudio("doctor", "--json", timeout=180).stdout)["gloo_cuda_all_reduce"]
    assert again["from_cache"] is True and again["t"] == fact["t"]


@pytest.mark.slow
def test_doctor_probe_runs_again_and_says_a_crash_in_plain_words(monkeypatch):
    monkeypatch.setenv(probe.CHILD_ENV, json.dumps(child(ONE_GPU + "import ctypes; ctypes.string_at(0)\n")))
    res = ddpstudio("doctor", "--probe", timeout=180)
    assert res.returncode == 0, res.stderr
    assert ("GPU gradients go through the CPU: Gloo crashed all-reducing CUDA tensors here "
            "(pytorch #186535).") in res.stdout
    assert "Gloo all-reduce of CUDA tensors: crashes (the probe process killed by SIGSEGV while all-reducing " \
           "on GPU 0 (RTX Test)" in res.stdout
    assert "GPU 0 RTX Test: crashes (killed by SIGSEGV)" in res.stdout
    assert probe.cached_outcome() == "crashes"
