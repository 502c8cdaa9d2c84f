"""Per-rank batches proportional to each rank's speed (mixed GPUs, issue 25 §1), keeping the global batch.

Three pieces, used by the recipe when its plan says ``balance: measured``:

- :func:`split` turns each rank's measured step time (seconds per step + per sample, :func:`fit` from two
  batch sizes) into integer shares of the global batch that make the steps equally long (each >= 1, summing
  to it, none above a rank's memory cap);
- :class:`ShareSampler` gives each rank its share of every global batch of one seeded permutation, so an
  epoch covers each sample once whatever the shares (no sample twice, none lost);
- :func:`loss_weight` scales a rank's loss by ``share x world / global``: DDP then averages
  ``share/global x mean-gradient`` over the ranks, which is the gradient of the global batch's mean, as a run
  with equal batches of the same global size computes it.

The permutation is DistributedSampler's (``torch.randperm`` seeded ``seed + epoch``) and its global batch k
is ``perm[k*G:(k+1)*G]``, the same samples DistributedSampler's ranks take at step k together (rank r gets
``perm[r::world]``), so a balanced run trains on exactly the samples an equal run does, step by step.
"""

from __future__ import annotations

import os
import time
from typing import Iterator, Sequence

# Test and benchmark seam: "RANK:SECONDS[,RANK:SECONDS...]" makes each rank named sleep SECONDS per sample of
# each forward/backward, a stand-in for a slower GPU (its time grows with its batch, as a real device's
# does; a sleep, unlike CPU work, does not compete with the other ranks for cores). Never set in runs.
SLOW_ENV = "DDPSTUDIO_SLOW_RANK"


def slow_seconds(rank: int) -> float:
    """Seconds per sample this rank sleeps under :data:`SLOW_ENV` (0 when not asked)."""
    for item in os.environ.get(SLOW_ENV, "").split(","):
        who, _, seconds = item.partition(":")
        if seconds and int(who) == rank:
            return float(seconds)
    return 0.0


def slow_down(per_sample: float, samples: int) -> None:
    if per_sample > 0:
        time.sleep(per_sample * samples)


def split(per_sample: Sequence[float], global_batch: int, caps: Sequence[int | None] | None = None,
          overhead: Sequence[float] | None = None) -> list[int]:
    """Integer shares of ``global_batch`` that make every rank's step take the same time.

    A rank's step takes ``overhead + per_sample x batch`` seconds; without overhead the shares are proportional
    to speed (1 / seconds per sample). Each share is at least 1 and at most its cap (the samples its GPU
    holds); largest remainders round them. Raises ValueError when the caps hold less than the global batch.
    """
    world = len(per_sample)
    if global_batch < world:
        raise ValueError(f"a global batch of {global_batch} cannot give each of {world} ranks a sample")
    hi = [global_batch if c is None else max(1, int(c)) for c in (caps or [None] * world)]
    if sum(hi) < global_batch:
        raise ValueError(f"the GPUs hold {sum(hi)} samples per step together ({hi} per rank), fewer than the "
                         f"global batch of {global_batch}; lower the batch size")
    b = [max(s, 1e-12) for s in per_sample]
    a = [max(0.0, o) for o in (overhead or [0.0] * world)]

    def batches(t: float) -> list[float]:  # what each rank does in t seconds, within [1, cap]
        return [min(hi[r], max(1.0, (t - a[r]) / b[r])) for r in range(world)]

    low, high = 0.0, max(a) + max(b) * global_batch + 1.0
    for _ in range(200):  # bisection on the common step time
        mid = (low + high) / 2
        low, high = (mid, high) if sum(batches(mid)) < global_batch else (low, mid)
    exact = batches(high)
    shares = [min(hi[r], max(1, int(exact[r]))) for r in range(world)]
    by_remainder = sorted(range(world), key=lambda r: exact[r] - int(exact[r]), reverse=True)
    while sum(shares) < global_batch:
        for r in by_remainder:
            if sum(shares) < global_batch and shares[r] < hi[r]:
                shares[r] += 1
    while sum(shares) > global_batch:  # the floor of 1 overshot: take back from the largest
        shares[max(range(world), key=lambda r: shares[r])] -= 1
    return shares


def fit(n: int, t_n: float, m: int, t_m: float) -> tuple[float, float]:
    """(seconds per sample, seconds per step) from step times at two batch sizes n > m."""
    per_sample = (t_n - t_m) / (n - m) if n > m else 0.0
    if per_sample <= 0:  # noise larger than the difference: all of it per sample
        return t_n / n, 0.0
    return per_sample, max(0.0, t_n - per_sample * n)


def loss_weight(share: int, world: int, global_batch: int) -> float:
    """The factor on a rank's mean loss that makes DDP's average the global batch's mean gradient."""
    return share * world / global_batch


class ShareSampler:
    """A batch sampler: this rank's slice of each global batch of the epoch's permutation (drop_last)."""

    def __init__(self, size: int, shares: Sequence[int], rank: int, seed: int = 0) -> None:
        self.size, self.rank, self.seed, self.epoch = size, rank, seed, 0
        self.set_shares(shares)

    def set_shares(self, shares: Sequence[int]) -> None:
        self.shares = list(shares)
        self.global_batch = sum(self.shares)
        self.offset = sum(self.shares[:self.rank])

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.size // self.global_batch

    def __iter__(self) -> Iterator[list[int]]:
        import torch

        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)  # as DistributedSampler(shuffle=True) does
        perm = torch.randperm(self.size, generator=g).tolist()
        share = self.shares[self.rank]
        for k in range(len(self)):
            start = k * self.global_batch + self.offset
            yield perm[start:start + share]


def gather(per_sample: float, overhead: float, cap: int | None, device, exchange: str
           ) -> tuple[list[float], list[float], list[int | None]]:
    """Every rank's seconds per sample, seconds per step and memory cap, through one all-reduce (the staged
    door, rank/staged.py: a CUDA tensor never reaches Gloo's all-reduce under the staged exchange)."""
    import torch
    import torch.distributed as dist

    from ddpstudio.rank import staged

    world, rank = dist.get_world_size(), dist.get_rank()
    vector = torch.zeros(3 * world, dtype=torch.float64, device=device)
    vector[rank], vector[world + rank], vector[2 * world + rank] = per_sample, overhead, float(cap or 0)
    staged.all_reduce(vector, exchange)
    values = vector.cpu().tolist()
    return values[:world], values[world:2 * world], [int(c) if c else None for c in values[2 * world:]]


def describe(shares: Sequence[int], per_sample: Sequence[float], overhead: Sequence[float],
             caps: Sequence[int | None]) -> str:
    """One line: each rank's batch and why."""
    parts = []
    for r, share in enumerate(shares):
        cap = caps[r] if caps else None
        capped = f", capped by memory at {cap}" if cap is not None and share >= cap else ""
        parts.append(f"rank {r} batch {share} ({per_sample[r] * 1e3:.3g} ms per sample + {overhead[r] * 1e3:.3g} ms "
                     f"per step{capped})")
    return (f"batches balanced by measured speed (global batch {sum(shares)} kept): " + "; ".join(parts))
