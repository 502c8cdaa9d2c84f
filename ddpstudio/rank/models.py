"""The recipe's model: a torchvision classifier by name, or the built-in ``mlp``.

``mlp`` (flatten, 64 hidden units, ReLU, one output per class) checks a machine's DDP plumbing
through the whole run path in seconds: it needs no torchvision import, which costs each rank
about as much CPU as ``import torch`` itself (measured in the README), and its gradient is a few
thousand numbers. It learns the synthetic data's class patterns too, so its loss falls.
"""

from __future__ import annotations

import torch

from ddpstudio.core.plan import MLP_MODEL

MLP_HIDDEN = 64


def build_model(name: str, num_classes: int, image_size: int) -> torch.nn.Module:
    """A fresh, untrained model; torchvision is imported only for its own models."""
    if name == MLP_MODEL:
        return mlp(num_classes, image_size)
    import torchvision

    return torchvision.models.get_model(name, weights=None, num_classes=num_classes)


def mlp(num_classes: int, image_size: int) -> torch.nn.Module:
    """Two linear layers on the flattened 3-channel image."""
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * image_size * image_size, MLP_HIDDEN),
                               torch.nn.ReLU(), torch.nn.Linear(MLP_HIDDEN, num_classes))
