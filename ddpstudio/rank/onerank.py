"""A run of one rank trains its model without DistributedDataParallel: there is nothing to exchange.

DDP with a single process still does its per-step work: an autograd hook per parameter, each
gradient copied into (or divided in) its bucket, a collective per bucket. On the CPU that is 372
more operators per step for resnet18 than the bare model (1,854 against 1,482, counted with
``torch.profiler``), 124 more with the one-rank hook of rank/staged.py; on a GPU each is a kernel
launch, and there small steps are bound by launches (issue 20). :class:`OneRank` gives the recipe
what it uses of DDP (``module``, ``no_sync()``) around the bare model.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch


class OneRank(torch.nn.Module):
    """The model of a one-rank run, in DDP's shape: ``module`` is the model, ``no_sync()`` does nothing
    (no gradient is ever exchanged), and the state dict has DDP's ``module.`` prefix too."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def no_sync(self):
        return nullcontext()
