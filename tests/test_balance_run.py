"""Balanced batches for real (issue 25 §1): two Gloo ranks on the CPU, the built-in perceptron (no BatchNorm).

Rank 1 is slowed through the documented seam (``DDPSTUDIO_SLOW_RANK``, rank/balance.py: it sleeps per
sample, as a slower GPU takes longer per sample), so ``--balance measured`` gives the ranks unequal batches.
Weighted by their shares, their gradients must train exactly as equal batches of the same global batch do,
up to float rounding.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from ddpstudio.core import protocol
from ddpstudio.rank.balance import SLOW_ENV
from tests.conftest import seed_cache
from tests.studio import checkpointed_side_by_side, final, of_type

pytestmark = pytest.mark.slow
STEPS = 6
# Rank 1's sleep per sample. The probe times 16 samples against 8, so the seam adds 80 ms between the two;
# at 2 ms (16 ms) one lost time slice of a loaded 2-core machine (4-10 ms) in a probe pass could hide a
# quarter of it, and the measured difference came out 0.8 ms instead of 2 (census run, load 4).
SLOW_S = 0.01
RECIPE = ["--model", "mlp", "--image-size", "8", "--max-steps", str(STEPS), "--workers", "0", "--lr", "0.05",
          "--batch-size", "16", "--rendezvous-timeout", "60"]
RUNS = ("measured", "equal")


def _start(home, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ddpstudio", "run", "--json", *RECIPE, "--balance", name,
         "--checkpoint-dir", str(home / f"ck-{name}")],
        env={**os.environ, "DDPSTUDIO_HOME": str(home), SLOW_ENV: f"1:{SLOW_S}"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, warm_cache):
    """The same seeded run with rank 1 slowed, two ways: batches measured for speed, and equal ones."""
    home = seed_cache(tmp_path_factory.mktemp("balance-home"), warm_cache)
    return checkpointed_side_by_side(home, {name: _start(home, name) for name in RUNS})


def test_unequal_batches_train_as_equal_batches_of_the_same_global_size(runs):
    balanced = of_type(runs["measured"]["events"], protocol.BATCH_BALANCED)
    assert len(balanced) == 1 and not of_type(runs["equal"]["events"], protocol.BATCH_BALANCED)
    shares = balanced[0].get("batches")
    assert sum(shares) == 32 and min(shares) >= 1 and shares[0] > shares[1], shares  # rank 1 is the slow one
    measured, equal = (runs[name]["checkpoint"] for name in RUNS)
    assert measured["global_step"] == equal["global_step"] == STEPS
    for name, value in equal["model"].items():
        torch.testing.assert_close(measured["model"][name], value, rtol=1e-5, atol=1e-6, msg=name)
    # The reported loss is the global batch's mean in both (each rank's loss weighted by its share).
    losses = {name: [e.get("loss") for e in of_type(runs[name]["events"], protocol.GLOBAL_STEP)] for name in RUNS}
    assert len(losses["equal"]) == STEPS
    assert losses["measured"] == pytest.approx(losses["equal"], rel=1e-5)


def test_the_plan_and_the_events_say_each_ranks_batch_and_why(runs):
    evs = runs["measured"]["events"]
    reasons = of_type(evs, protocol.RUN_STARTED)[0].get("reasons")
    assert ("each rank's batch sized for its measured speed after its first passes, the global batch of 32 kept "
            "and the gradients weighted by each rank's share (--balance measured)") in reasons
    event = of_type(evs, protocol.BATCH_BALANCED)[0]
    shares, per_sample = event.get("batches"), event.get("seconds_per_sample")
    assert per_sample[1] > per_sample[0] + 0.75 * SLOW_S  # the seam's sleep per sample, measured
    reason = event.get("reason")
    assert reason.startswith("batches balanced by measured speed (global batch 32 kept): ")
    assert f"rank 0 batch {shares[0]} (" in reason and f"rank 1 batch {shares[1]} (" in reason
    steps = of_type(evs, protocol.STEP)
    assert sorted((e.rank, e.get("step")) for e in steps) == [(r, s) for r in (0, 1) for s in range(1, STEPS + 1)]
    assert final(evs).get("state") == protocol.FINISHED
    equal_reasons = of_type(runs["equal"]["events"], protocol.RUN_STARTED)[0].get("reasons")
    assert "equal batches on every rank (--balance equal)" in equal_reasons
