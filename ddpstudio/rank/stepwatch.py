"""Where the step watch of :mod:`ddpstudio.rank.steploss` taps a script: backward, optimizer steps, DDP forwards.

Installed by the rank helper once the script's process group exists
(:mod:`ddpstudio.rank.script_hooks`), once per process:

- ``Tensor.backward`` on a one-element tensor with no gradient given: the loss;
- ``GradScaler.scale`` marks its result with the loss it scaled, and
  ``GradScaler.step`` tells a step it skipped (its optimizer did not move);
- torch's global optimizer post hook: a step;
- ``DistributedDataParallel.forward`` in training (training mode, gradients
  on): the batch's samples, the first dimension of the first tensor among its
  arguments (in a list, tuple or dict too);
- at exit and at ``destroy_process_group``: the last steps' report.
"""

from __future__ import annotations

import atexit
from typing import Any, Callable

from ddpstudio.rank.emit import Emitter
from ddpstudio.rank.steploss import UNSCALED, StepLosses

MARK = "_ddpstudio_losses"


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
    scaler = torch.amp.GradScaler
    scaler.scale = _scale(scaler.scale)
    scaler.step = _scaler_step(losses, scaler.step)
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
    def backward(tensor: Any, gradient: Any = None, *args: Any, **kwargs: Any) -> Any:
        if gradient is None and tensor.numel() == 1:
            losses.note(tensor)
        return original(tensor, gradient, *args, **kwargs)

    backward.__wrapped__ = original  # type: ignore[attr-defined]
    backward.__doc__, backward.__name__ = original.__doc__, original.__name__
    return backward


def _forward(losses: StepLosses, original: Callable, grad_enabled: Callable[[], bool]) -> Callable:
    def forward(module: Any, *args: Any, **kwargs: Any) -> Any:
        if module.training and grad_enabled():
            losses.forwarded(args, kwargs)
        return original(module, *args, **kwargs)

    forward.__wrapped__, forward.__doc__, forward.__name__ = original, original.__doc__, original.__name__
    return forward


def _scale(original: Callable) -> Callable:
    def scale(scaler: Any, outputs: Any) -> Any:
        scaled = original(scaler, outputs)
        if scaled is not outputs and getattr(outputs, "numel", None) is not None and outputs.numel() == 1:
            try:
                setattr(scaled, UNSCALED, outputs.detach())
            except (AttributeError, TypeError):
                pass
        return scaled

    scale.__wrapped__, scale.__doc__, scale.__name__ = original, original.__doc__, original.__name__
    return scale


def _scaler_step(losses: StepLosses, original: Callable) -> Callable:
    def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        before = losses.stepped
        result = original(scaler, optimizer, *args, **kwargs)
        if losses.stepped == before:
            losses.step_skipped()
        return result

    step.__wrapped__, step.__doc__, step.__name__ = original, original.__doc__, original.__name__
    return step
