"""``ddpstudio doctor`` reports the Gloo-on-CUDA probe: real probe here (no CUDA), cache, and a child that crashes."""

from __future__ import annotations

import json

from ddpstudio.core.exchange import probe
from tests.studio import ddpstudio
from tests.test_exchange_probe import ONE_GPU, child


def test_doctor_json_probes_once_then_reads_the_cache():
    first = ddpstudio("doctor", "--json", timeout=180)
    assert first.returncode == 0, first.stderr
    fact = json.loads(first.stdout)["gloo_cuda_all_reduce"]
    assert fact["outcome"] == "not applicable" and fact["from_cache"] is False
    assert fact["sentence"] == "No CUDA GPU: gradients are all-reduced on the CPU anyway"
    assert {"detail", "gpus", "key", "t", "duration_s", "exit"} <= set(fact)
    again = json.loads(ddpstudio("doctor", "--json", timeout=180).stdout)["gloo_cuda_all_reduce"]
    assert again["from_cache"] is True and again["t"] == fact["t"]


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
