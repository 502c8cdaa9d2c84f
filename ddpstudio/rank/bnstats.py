"""BatchNorm statistics recomputed from training batches before each evaluation ("precise BN").

BatchNorm's running mean and variance are an exponential average over batches
seen while the weights were moving. After tens of steps at the recipe's
learning rate they describe an older model, and evaluation, which uses them,
scores far worse than training does. Measured on resnet18, 32 px synthetic
data, 40 steps of batch 64: validation loss 1.72 and top-1 78 % with the
running statistics; 0.05 and 98 % once they were recomputed from 8 training
batches (training loss 0.07). The demo showed a newcomer eval loss 7.9 next to
a training loss of 0.12 (issue 20).

Every rank recomputes them on its own shard, then the ranks average them, so
every rank evaluates (and rank 0 saves) the same statistics.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, Subset

from ddpstudio.rank import staged

BATCHES = 8  # enough for stable statistics (see the figures above); a few forward passes per evaluation


def norm_layers(model: torch.nn.Module) -> list[torch.nn.modules.batchnorm._BatchNorm]:
    return [m for m in model.modules()
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats]


def calibration_loader(dataset: Dataset, rank: int, world_size: int, batch_size: int,
                       batches: int = BATCHES) -> DataLoader:
    """This rank's first ``batches`` training batches in a fixed order, on their own loader (one without
    worker processes: the training loader's persistent iterator must not be reset mid-epoch)."""
    mine = list(range(rank, len(dataset), world_size))[: batches * batch_size]
    return DataLoader(Subset(dataset, mine), batch_size=batch_size, shuffle=False, num_workers=0)


@torch.no_grad()
def recompute(model: torch.nn.Module, batches: Iterable, device: torch.device, exchange: str,
              autocast: AbstractContextManager | None = None) -> int:
    """Replace every BatchNorm layer's running statistics by their average over ``batches`` and over all
    ranks; returns how many batches this rank used (0: the model has no BatchNorm, nothing changed).

    Each rank must pass the same number of batches' worth of calls: the averaging is one all-reduce per
    layer, made by every rank in the same order.
    """
    layers = norm_layers(model)
    if not layers:
        return 0
    was_training = model.training
    momenta = [m.momentum for m in layers]
    before = [(m.running_mean.clone(), m.running_var.clone()) for m in layers]
    for m in layers:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the batches below, not an exponential one
    model.train()
    used = 0
    try:
        with autocast or nullcontext():
            for images, _ in batches:
                model(images.to(device, non_blocking=True))
                used += 1
    finally:
        for m, momentum in zip(layers, momenta):
            m.momentum = momentum
        model.train(was_training)
    if used == 0:  # no batch on this rank: keep what was there rather than the reset's 0 and 1
        for m, (mean, var) in zip(layers, before):
            m.running_mean.copy_(mean)
            m.running_var.copy_(var)
    if dist.is_initialized() and dist.get_world_size() > 1:
        world = dist.get_world_size()
        for m in layers:
            stats = torch.cat([m.running_mean, m.running_var])
            staged.all_reduce(stats, exchange)
            stats /= world
            m.running_mean.copy_(stats[: m.running_mean.numel()])
            m.running_var.copy_(stats[m.running_mean.numel():])
    return used
