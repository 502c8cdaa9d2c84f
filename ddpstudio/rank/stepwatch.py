"""Where the step watch of :mod:`ddpstudio.rank.steploss` taps a script: backward, optimizer steps, DDP forwards.

Installed by the rank helper once the script's process group exists
(:mod:`ddpstudio.rank.script_hooks`), once per process:

- ``Tensor.backward`` on a one-element tensor with no gradient given: the loss;
- ``GradScaler.scale`` marks its result with the loss it scaled, and
  ``GradScaler.step`` tells a step it skipped (its optimizer did not move);
  the same for a subclass with its own (FSDP's ``ShardedGradScaler``);
- torch's global optimizer post hook: a step;
- ``DistributedDataParallel.forward`` in training (training mode, gradients
  on): the batch's samples, the first dimension of the first tensor among its
  arguments (in a list, tuple or dict too);
- at exit and at ``destroy_process_group``: the last steps' report.
"""

from __future__ import annotations

import atexit
import functools
from typing import Any, Callable

from ddpstudio.rank.emit import Emitter
from ddpstudio.rank.steploss import UNSCALED, StepLosses

MARK = "_ddpstudio_losses"
WRAPPED = "_ddpstudio_watched"  # on a GradScaler class's scale or step: already wrapped


def install(emitter: Emitter, world_size: int) -> StepLosses | None:
    """Watch the script's backward passes, optimizer steps and DDP forwards; once per process."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.optim.optimizer import register_optimizer_step_post_hook

    if getattr(torch.Tensor, MARK, None) is not None:
        return None
    losses = StepLosses(emitter, world_size)
    setattr(torch.Tensor, MARK, losses)
    torch.Tensor.backward = _backward(losses, torch.Tensor.backward)
    DDP.forward = _forward(losses, DDP.forward, torch.is_grad_enabled)
    _watch_scalers(losses, torch.amp.GradScaler)
    register_optimizer_step_post_hook(lambda optimizer, *_: losses.optimizer_stepped(optimizer))
    atexit.register(losses.flush)
    return losses


def flush() -> None:
    """Emit what this process's script has not had emitted yet (``destroy_process_group``)."""
    import torch

    losses = getattr(torch.Tensor, MARK, None)
    if losses is not None:
        losses.flush()


def _backward(losses: StepLosses, original: Callable) -> Callable:
    @functools.wraps(original)
    def backward(tensor: Any, gradient: Any = None, *args: Any, **kwargs: Any) -> Any:
        if gradient is None and tensor.numel() == 1:
            losses.note(tensor)
        return original(tensor, gradient, *args, **kwargs)

    return backward


def _forward(losses: StepLosses, original: Callable, grad_enabled: Callable[[], bool]) -> Callable:
    @functools.wraps(original)
    def forward(module: Any, *args: Any, **kwargs: Any) -> Any:
        # The wrapped model's mode, not the wrapper's: Lightning trains the module inside a DDP it never sets to
        # train mode (2.6.6: wrapper eval, module train; helper trial 2026-12-07, no samples/s for Lightning).
        if module.module.training and grad_enabled():
            losses.forwarded(args, kwargs)
        return original(module, *args, **kwargs)

    return forward


def _watch_scalers(losses: StepLosses, base: type) -> None:
    """``scale`` and ``step`` of ``GradScaler`` and of every subclass that has its own (FSDP's
    ``ShardedGradScaler`` scales by itself): those imported now, and any other when its first instance is made."""
    pending = [base]
    while pending:
        cls = pending.pop()
        _watch_scaler_class(losses, cls)
        pending += cls.__subclasses__()
    original_init = base.__init__

    @functools.wraps(original_init)
    def __init__(scaler: Any, *args: Any, **kwargs: Any) -> None:
        _watch_scaler_class(losses, type(scaler))
        original_init(scaler, *args, **kwargs)

    base.__init__ = __init__


def _watch_scaler_class(losses: StepLosses, cls: type) -> None:
    for name, wrap in (("scale", _scale), ("step", lambda original: _scaler_step(losses, original))):
        own = cls.__dict__.get(name)
        if own is not None and not getattr(own, WRAPPED, False):
            wrapped = wrap(own)
            setattr(wrapped, WRAPPED, True)
            setattr(cls, name, wrapped)


def _scale(original: Callable) -> Callable:
    @functools.wraps(original)
    def scale(scaler: Any, outputs: Any) -> Any:
        scaled = original(scaler, outputs)
        if scaled is not outputs and getattr(outputs, "numel", None) is not None and outputs.numel() == 1:
            try:
                setattr(scaled, UNSCALED, outputs.detach())
            except (AttributeError, TypeError):
                pass
        return scaled

    return scale


def _scaler_step(losses: StepLosses, original: Callable) -> Callable:
    @functools.wraps(original)
    def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        before = losses.stepped
        result = original(scaler, optimizer, *args, **kwargs)
        if losses.stepped == before:
            losses.step_skipped()
        return result

    return step
