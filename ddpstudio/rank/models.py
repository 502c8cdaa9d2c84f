"""The recipe's model: a torchvision classifier by name, or the built-in ``mlp`` (core/mlp.py)."""

from __future__ import annotations

import torch

from ddpstudio.core.mlp import mlp
from ddpstudio.core.plan import MLP_MODEL


def build_model(name: str, num_classes: int, image_size: int) -> torch.nn.Module:
    """A fresh, untrained model; torchvision is imported only for its own models."""
    if name == MLP_MODEL:
        return mlp(num_classes, image_size)
    import torchvision

    return torchvision.models.get_model(name, weights=None, num_classes=num_classes)
