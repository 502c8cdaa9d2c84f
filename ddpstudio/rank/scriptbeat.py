"""A user's script beats too: the rank helper marks its phases from the outside (issue 25 §3).

Installed by :mod:`ddpstudio.rank.script_hooks` once the script's process
group exists, and only when the launcher watches for hangs. Each wrapper marks
the phase on the way in and the one it interrupted on the way out (a fresh
mark: the call returned, the rank moved):

- a DataLoader batch (``_BaseDataLoaderIter.__next__``, the base of torch's
  single- and multi-process iterators) -> ``data``;
- ``DistributedDataParallel.forward`` -> ``forward`` (``eval`` without
  gradients or in eval mode);
- ``Tensor.backward`` -> ``backward`` (DDP's gradient exchange runs inside);
- ``torch.distributed`` collectives the script calls -> ``exchange``;
- ``torch.save`` -> ``checkpoint``;
- every optimizer step (torch's global ``register_optimizer_step_pre_hook`` /
  ``_post_hook``) -> ``optimizer``, and after it the next step begins: a
  script's step is its number of optimizer steps plus one.

Between them the rank is in ``script``: its own code.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any, Callable

from ddpstudio.core.launch.hangwatch import BACKWARD, CHECKPOINT, DATA, EVAL, EXCHANGE, FORWARD, OPTIMIZER, SCRIPT
from ddpstudio.rank.heartbeat import Heartbeat, heartbeat

MARK = "_ddpstudio_beats"
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "broadcast",
               "broadcast_object_list", "barrier", "reduce", "reduce_scatter", "reduce_scatter_tensor", "gather",
               "gather_object", "scatter", "scatter_object_list", "all_to_all", "all_to_all_single", "monitored_barrier")


def install(dist: ModuleType) -> Heartbeat | None:
    """Mark the script's phases; once per process. None when the launcher watches no hangs."""
    if getattr(dist, MARK, False):
        return None
    beat = heartbeat()
    if beat is None:
        return None
    setattr(dist, MARK, True)
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    beat.step = 1  # the first step; beats begin with the first mark (setup before it is not judged)
    _BaseDataLoaderIter.__next__ = _during(beat, DATA, _BaseDataLoaderIter.__next__)
    DDP.forward = _forward(beat, DDP.forward, torch.is_grad_enabled)
    torch.Tensor.backward = _during(beat, BACKWARD, torch.Tensor.backward)
    torch.save = _during(beat, CHECKPOINT, torch.save)
    for name in COLLECTIVES:
        if callable(getattr(dist, name, None)):
            setattr(dist, name, _during(beat, EXCHANGE, getattr(dist, name)))
    register_optimizer_step_pre_hook(_optimizer_begins(beat))
    register_optimizer_step_post_hook(_optimizer_ends(beat))
    return beat


def _optimizer_begins(beat: Heartbeat) -> Callable:
    def begins(*_: Any) -> None:
        beat.mark(OPTIMIZER)

    return begins


def _optimizer_ends(beat: Heartbeat) -> Callable:
    def ends(*_: Any) -> None:  # the next step begins
        beat.mark(SCRIPT, beat.step + 1)

    return ends


def _during(beat: Heartbeat, phase: str, original: Callable) -> Callable:
    @functools.wraps(original)
    def marked(*args: Any, **kwargs: Any) -> Any:
        before = beat.phase or SCRIPT
        beat.mark(phase)
        try:
            return original(*args, **kwargs)
        finally:
            beat.mark(before)

    return marked


def _forward(beat: Heartbeat, original: Callable, grad_enabled: Callable[[], bool]) -> Callable:
    @functools.wraps(original)
    def forward(module: Any, *args: Any, **kwargs: Any) -> Any:
        before = beat.phase or SCRIPT
        beat.mark(FORWARD if module.training and grad_enabled() else EVAL)
        try:
            return original(module, *args, **kwargs)
        finally:
            beat.mark(before)

    return forward
