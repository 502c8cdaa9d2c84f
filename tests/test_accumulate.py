"""Gradient accumulation for real: two Gloo ranks on the CPU, the built-in perceptron (no BatchNorm).

Two micro-batches of 16 per optimizer step must train exactly as one batch of
32 does (same samples in the same order, the gradient of their mean), up to
float rounding, and DDP must exchange gradients once per optimizer step: the
exchanges are counted by a wrapper around the recipe's own communication hook
(rank/exchangecount.py), never by a fake of torch.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from ddpstudio.core import protocol
from ddpstudio.rank.exchangecount import COUNT_ENV
from tests.conftest import seed_cache
from tests.studio import checkpointed_side_by_side, final, of_type

pytestmark = pytest.mark.slow
STEPS = 6
RECIPE = ["--model", "mlp", "--image-size", "8", "--max-steps", str(STEPS), "--workers", "0", "--lr", "0.05",
          "--rendezvous-timeout", "60"]
SHAPES = {"accumulated": ("16", "2"), "plain": ("32", "1")}  # name: (batch per rank, micro-batches per step)


def _start(home, name: str) -> subprocess.Popen:
    batch, accumulate = SHAPES[name]
    return subprocess.Popen(
        [sys.executable, "-m", "ddpstudio", "run", "--json", *RECIPE, "--batch-size", batch, "--accumulate",
         accumulate, "--checkpoint-dir", str(home / f"ck-{name}")],
        env={**os.environ, "DDPSTUDIO_HOME": str(home), COUNT_ENV: "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, warm_cache):
    """The same seeded run two ways, side by side: 2 x 16 accumulated, and 32 at once."""
    home = seed_cache(tmp_path_factory.mktemp("accumulate-home"), warm_cache)
    return checkpointed_side_by_side(home, {name: _start(home, name) for name in SHAPES})


def test_two_micro_batches_of_16_train_as_one_batch_of_32(runs):
    accumulated, plain = (runs[name]["checkpoint"] for name in ("accumulated", "plain"))
    assert accumulated["global_step"] == plain["global_step"] == STEPS
    assert accumulated["accumulate"] == 2 and plain["accumulate"] == 1
    for name, value in plain["model"].items():
        torch.testing.assert_close(accumulated["model"][name], value, rtol=1e-5, atol=1e-6, msg=name)
    # The loss of each optimizer step is the mean over its micro-batches: the batch of 32's loss.
    losses = {name: [e.get("loss") for e in of_type(runs[name]["events"], protocol.GLOBAL_STEP)] for name in SHAPES}
    assert len(losses["plain"]) == STEPS
    assert losses["accumulated"] == pytest.approx(losses["plain"], rel=1e-5)


def test_gradients_are_exchanged_once_per_optimizer_step(runs):
    for name in SHAPES:
        steps = of_type(runs[name]["events"], protocol.STEP)
        assert sorted((e.rank, e.get("step")) for e in steps) == [(r, s) for r in (0, 1) for s in range(1, STEPS + 1)]
        # Cumulative count at the end of each step: exactly one exchange per optimizer step, none under no_sync.
        assert all(e.get("exchanges") == e.get("step") for e in steps), [(e.get("step"), e.get("exchanges"))
                                                                         for e in steps]


def test_steps_progress_and_the_plan_count_optimizer_steps(runs):
    evs = runs["accumulated"]["events"]
    started = of_type(evs, protocol.RUN_STARTED)[0]
    assert started.get("effective_batch") == 64  # 2 ranks x 16 x 2
    assert "effective batch 64 = 2 ranks x 16 per rank x 2 micro-batches accumulated per optimizer step" in \
        started.get("reasons")
    last = of_type(evs, protocol.GLOBAL_STEP)[-1]
    # 4096 synthetic samples: 2048 per rank, 128 micro-batches of 16, 64 optimizer steps an epoch.
    assert (last.get("step"), last.get("total_steps"), last.get("steps_per_epoch")) == (STEPS, STEPS, 64)
    assert final(evs).get("state") == protocol.FINISHED
