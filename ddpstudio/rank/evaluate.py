"""Evaluation across all ranks: each rank scores its shard, one all-reduce sums the totals.

The shard comes from a DistributedSampler without shuffling. That sampler pads
the index list by repeating its head so every rank gets the same number of
samples; padded positions are masked out here, so loss and accuracy are over
exactly the validation set, with no sample counted twice. The totals live on
the rank's device; the all-reduce goes through :func:`ddpstudio.rank.staged.all_reduce`,
which stages them through CPU memory when the exchange is ``staged`` (pytorch #186535:
a Gloo all-reduce of a CUDA tensor kills a Windows rank with 0xC0000005).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from ddpstudio.rank.staged import all_reduce


@dataclass(frozen=True)
class EvalResult:
    loss: float
    top1: float  # fraction in [0, 1]
    top5: float | None  # only with more than 5 classes
    samples: int


def make_loader(dataset: Dataset, rank: int, world_size: int, batch_size: int, workers: int = 0,
                pin: bool = False) -> DataLoader:
    """This rank's shard; its workers are kept between evaluations (spawned ones take seconds to start:
    core/dataworkers.py); ``pin``: batches in pinned memory, for a GPU (see the training loader in recipe.py)."""
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False, drop_last=False)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      persistent_workers=workers > 0, pin_memory=pin)


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader: DataLoader, device: torch.device, num_classes: int,
             rank: int, world_size: int, exchange: str) -> EvalResult:
    """Score ``model`` (the bare module: no DDP forward, so no collective per batch) on this rank's shard;
    ``exchange`` is the run's gradient exchange (``staged`` or ``native``)."""
    was_training = model.training
    model.eval()
    size = len(loader.dataset)
    # Sums of loss, top-1 hits, top-5 hits and real samples; float64 so counts stay exact.
    totals = torch.zeros(4, dtype=torch.float64, device=device)
    seen = 0  # position of this rank's next sample in the padded index list is rank + seen * world_size
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        n = labels.shape[0]
        positions = rank + world_size * torch.arange(seen, seen + n, device=device)
        real = positions < size
        seen += n
        logits = model(images).float()
        losses = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
        k = min(5, num_classes)
        top = logits.topk(k, dim=1).indices
        hit1 = top[:, 0] == labels
        hit5 = (top == labels[:, None]).any(dim=1)
        totals += torch.stack([losses[real].sum(), hit1[real].sum(), hit5[real].sum(), real.sum()]).double()
    all_reduce(totals, exchange)
    model.train(was_training)
    loss_sum, top1, top5, count = totals.tolist()
    count = max(count, 1.0)
    return EvalResult(loss_sum / count, top1 / count, top5 / count if num_classes > 5 else None, int(count))
