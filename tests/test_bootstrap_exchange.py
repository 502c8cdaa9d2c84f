"""The first-run setup records the Gloo-on-CUDA probe and never fails because of it (real children)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ddpstudio.bootstrap import exchange
from ddpstudio.core.exchange import probe
from ddpstudio.core.platform import LINUX
from tests.test_exchange_probe import ONE_GPU, child

PYTHON = Path(sys.executable)


@pytest.mark.slow
def test_the_real_probe_in_the_environment_is_recorded_and_cached_for_the_app():
    lines: list[str] = []
    data = exchange.record(PYTHON, LINUX, lines.append, env=None)
    assert data["outcome"] == "not applicable" and data["detail"] == "torch sees no CUDA GPU"
    assert data["sentence"] == "No CUDA GPU: gradients are all-reduced on the CPU anyway"
    assert not any(line.startswith(exchange.MARKER) for line in lines)  # the JSON line is not logged
    assert probe.cached_outcome() == "not applicable"


def test_a_probe_child_that_crashes_is_recorded_and_the_setup_goes_on():
    env = {**os.environ, probe.CHILD_ENV: json.dumps(child(ONE_GPU + "os.abort()\n"))}
    data = exchange.record(PYTHON, LINUX, lambda line: None, env=env)
    assert data["outcome"] == "crashes" and data["exit"] == "killed by SIGABRT"
    assert data["gpus"][0]["outcome"] == "crashes"
    assert "(pytorch #186535)" in data["sentence"]
    assert probe.cached_outcome() == "crashes"


def test_a_probe_that_itself_dies_is_recorded_as_unknown_without_raising():
    data = exchange.record(PYTHON, LINUX, lambda line: None, env=None,
                           command=[sys.executable, "-c", "print('starting'); import ctypes; ctypes.string_at(0)"])
    assert data == {"outcome": None, "detail": "the probe did not report (killed by SIGSEGV): starting"}


def test_a_probe_that_cannot_start_is_recorded_without_raising(tmp_path):
    data = exchange.record(tmp_path / "no-python", LINUX, lambda line: None, env=None)
    assert data["outcome"] is None and data["detail"].startswith("the probe could not start: ")
