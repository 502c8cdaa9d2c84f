"""Balanced batches for mixed GPUs (issue 25 §1), the parts without processes: the shares, the sampler, the plan.

The sampler is checked against torch's own DistributedSampler: a balanced run's global batch at each step
must be the very samples an equal run's ranks take together, so the two runs train alike.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DistributedSampler

from ddpstudio.core.gpu import FakeGpuSource, detect_inventory
from ddpstudio.core.plan import RecipeSpec
from ddpstudio.core.platform import LINUX
from ddpstudio.core.policy import PolicyError, Request, build_plan
from ddpstudio.rank.balance import ShareSampler, fit, loss_weight, split

LINUX_IFACES = {"lo": ["127.0.0.1", "::1"]}
RTX_4090 = {"name": "NVIDIA GeForce RTX 4090", "total_memory_mb": 24564, "compute_capability": "8.9"}
RTX_3060 = {"name": "NVIDIA GeForce RTX 3060", "total_memory_mb": 12288, "compute_capability": "8.6"}


def test_shares_follow_speed_keep_the_global_batch_and_give_each_rank_one():
    assert split([1.0, 1.0], 64) == [32, 32]
    assert split([1.0, 3.0], 64) == [48, 16]  # rank 1 takes three times as long per sample
    assert split([1.0, 2.0, 4.0], 70) == [40, 20, 10]
    assert split([1e-6, 1.0], 8) == [7, 1]  # a very slow rank still gets one sample
    odd = split([1.0, 1.3, 2.9], 101)
    assert sum(odd) == 101 and min(odd) >= 1 and odd == sorted(odd, reverse=True)


def test_a_fixed_cost_per_step_is_balanced_too():
    # Both ranks' steps take 10 ms + 1 ms per sample, but rank 1 pays 20 ms more per step: fewer samples.
    shares = split([0.001, 0.001], 64, overhead=[0.010, 0.030])
    assert shares == [42, 22]
    assert fit(32, 0.010 + 32 * 0.001, 16, 0.010 + 16 * 0.001) == pytest.approx((0.001, 0.010))
    assert fit(32, 0.032, 16, 0.033) == (0.001, 0.0)  # noise over the difference: all of it per sample


def test_memory_caps_hold_and_too_little_memory_says_so():
    assert split([1.0, 4.0], 64, caps=[40, None]) == [40, 24]
    with pytest.raises(ValueError, match="hold 50 samples per step together"):
        split([1.0, 1.0], 64, caps=[25, 25])


def test_loss_weights_make_the_mean_gradient():
    shares = [23, 9]
    # DDP averages over the ranks: sum(weight x mean-loss) / world = sum(share / global x mean-loss).
    assert sum(loss_weight(s, 2, 32) for s in shares) / 2 == pytest.approx(1.0)


@pytest.mark.parametrize("shares", [[5, 3], [1, 6, 2], [4, 4]])
def test_every_epoch_covers_each_sample_once_in_the_equal_runs_global_batches(shares):
    size, world, seed = 103, len(shares), 7
    global_batch = sum(shares)
    samplers = [ShareSampler(size, shares, r, seed) for r in range(world)]
    for epoch in (0, 1):
        for s in samplers:
            s.set_epoch(epoch)
        batches = [list(s) for s in samplers]
        steps = size // global_batch
        assert all(len(b) == steps and [len(x) for x in b] == [shares[r]] * steps for r, b in enumerate(batches))
        taken = [i for b in batches for batch in b for i in batch]
        assert len(taken) == len(set(taken)) == steps * global_batch  # no sample twice, none lost
        # torch's DistributedSampler with equal batches: the same samples in each step's global batch.
        per_rank = global_batch // world if global_batch % world == 0 else None
        if per_rank:
            equal = []
            for r in range(world):
                ds = DistributedSampler(range(size), num_replicas=world, rank=r, shuffle=True, seed=seed,
                                        drop_last=True)
                ds.set_epoch(epoch)
                order = list(ds)
                equal.append([order[k * per_rank:(k + 1) * per_rank] for k in range(len(order) // per_rank)])
            for k in range(steps):
                ours = sorted(i for r in range(world) for i in batches[r][k])
                theirs = sorted(i for r in range(world) for i in equal[r][k])
                assert ours == theirs, k
    assert torch.randperm(3).numel() == 3  # torch is the real one


def test_the_plan_balances_only_where_the_gpus_differ():
    mixed = detect_inventory(FakeGpuSource([RTX_4090, RTX_3060]))
    same = detect_inventory(FakeGpuSource([RTX_4090, RTX_4090]))
    cpu = detect_inventory()
    plan = build_plan(Request(recipe=RecipeSpec(batch_size=16)), LINUX, mixed, interfaces=LINUX_IFACES)
    assert plan.recipe.balance == "measured"
    assert ("each rank's batch sized for its measured speed after its first passes, the global batch of 32 kept "
            "and the gradients weighted by each rank's share: the GPUs differ (NVIDIA GeForce RTX 4090, NVIDIA "
            "GeForce RTX 3060)") in plan.reasons
    plan = build_plan(Request(recipe=RecipeSpec()), LINUX, same, interfaces=LINUX_IFACES)
    # The default on identical GPUs and on CPU ranks: equal batches, and no line about it among the reasons.
    assert plan.recipe.balance == "equal" and not any("batch sized" in r or "equal batches" in r for r in plan.reasons)
    plan = build_plan(Request(recipe=RecipeSpec()), LINUX, cpu, interfaces=LINUX_IFACES)
    assert plan.recipe.balance == "equal" and not any("batch sized" in r or "equal batches" in r for r in plan.reasons)
    plan = build_plan(Request(recipe=RecipeSpec(), balance="measured"), LINUX, cpu, interfaces=LINUX_IFACES)
    assert plan.recipe.balance == "measured"
    plan = build_plan(Request(recipe=RecipeSpec(), balance="equal"), LINUX, mixed, interfaces=LINUX_IFACES)
    assert plan.recipe.balance == "equal"
    with pytest.raises(PolicyError, match="unknown balance 'fast'") as err:
        build_plan(Request(recipe=RecipeSpec(), balance="fast"), LINUX, cpu, interfaces=LINUX_IFACES)
    assert err.value.field == "balance"
