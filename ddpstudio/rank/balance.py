"""Per-rank batches proportional to each rank's speed (mixed GPUs, issue 25 §1), keeping the global batch.

Three pieces, used by the recipe when its plan says ``balance: measured``:

- :func:`split` turns measured seconds per sample into integer shares of the global batch (each >= 1,
  summing to it, none above a rank's memory cap);
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

# Test and benchmark seam: "RANK:SECONDS" makes that rank sleep SECONDS per sample of each forward/backward,
# a stand-in for a slower GPU (its time grows with its batch, as a real device's does). Never set in runs.
SLOW_ENV = "DDPSTUDIO_SLOW_RANK"


def slow_seconds(rank: int) -> float:
    """Seconds per sample this rank sleeps under :data:`SLOW_ENV` (0 when not asked)."""
    raw = os.environ.get(SLOW_ENV, "")
    if ":" not in raw:
        return 0.0
    who, seconds = raw.split(":", 1)
    return float(seconds) if int(who) == rank else 0.0


def slow_down(per_sample: float, samples: int) -> None:
    if per_sample > 0:
        time.sleep(per_sample * samples)


def split(seconds_per_sample: Sequence[float], global_batch: int,
          caps: Sequence[int | None] | None = None) -> list[int]:
    """Integer shares of ``global_batch`` proportional to each rank's speed (1 / seconds per sample).

    Largest remainders round the shares; each is at least 1 and at most its cap (the samples its GPU holds).
    Raises ValueError when the caps together hold less than the global batch.
    """
    world = len(seconds_per_sample)
    if global_batch < world:
        raise ValueError(f"a global batch of {global_batch} cannot give each of {world} ranks a sample")
    caps = [global_batch if c is None else max(1, int(c)) for c in (caps or [None] * world)]
    if sum(caps) < global_batch:
        raise ValueError(f"the GPUs hold {sum(caps)} samples per step together ({caps} per rank), fewer than the "
                         f"global batch of {global_batch}; lower the batch size")
    rates = [1.0 / max(s, 1e-12) for s in seconds_per_sample]
    shares, free = [0] * world, list(range(world))
    left = global_batch
    # Give out proportionally; a rank that hits its cap keeps the cap, the rest is shared again among the others.
    while left > 0 and free:
        total = sum(rates[r] for r in free)
        exact = {r: max(1.0, left * rates[r] / total) for r in free}
        given = {r: min(int(exact[r]), caps[r] - shares[r]) for r in free}
        rest = left - sum(given.values())
        for r in sorted(free, key=lambda r: exact[r] - int(exact[r]), reverse=True):
            if rest <= 0:
                break
            if given[r] < caps[r] - shares[r]:
                given[r], rest = given[r] + 1, rest - 1
        while rest < 0:  # the 1-sample floor overshot: take back from the largest
            r = max(free, key=lambda r: given[r])
            given[r], rest = given[r] - 1, rest + 1
        for r in free:
            shares[r] += given[r]
        left = global_batch - sum(shares)
        free = [r for r in free if shares[r] < caps[r]]
    return shares


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


def gather(seconds: Sequence[float], cap: int | None, device) -> tuple[list[float], list[int | None]]:
    """Every rank's seconds per sample (the median of its own) and memory cap, through one all-reduce."""
    import torch
    import torch.distributed as dist

    world, rank = dist.get_world_size(), dist.get_rank()
    mine = sorted(seconds)[len(seconds) // 2]  # the median: one slow step (a page fault, a GC) does not decide
    vector = torch.zeros(2 * world, dtype=torch.float64, device=device)
    vector[rank], vector[world + rank] = mine, float(cap or 0)
    dist.all_reduce(vector)
    values = vector.cpu().tolist()
    return values[:world], [int(c) if c else None for c in values[world:]]


def describe(shares: Sequence[int], seconds_per_sample: Sequence[float], caps: Sequence[int | None]) -> str:
    """One line: each rank's batch and why."""
    parts = []
    for r, (share, s) in enumerate(zip(shares, seconds_per_sample)):
        cap = caps[r] if caps else None
        capped = f", capped by memory at {cap}" if cap is not None and share >= cap else ""
        parts.append(f"rank {r} batch {share} ({s * 1e3:.3g} ms per sample{capped})")
    return (f"batches balanced by measured speed (global batch {sum(shares)} kept): " + "; ".join(parts))
