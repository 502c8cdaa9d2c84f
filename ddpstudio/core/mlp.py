"""The built-in two-layer perceptron (``--model mlp``), defined once for the ranks and for the checks before them.

``mlp`` (flatten, 64 hidden units, ReLU, one output per class) checks a machine's DDP plumbing
through the whole run path in seconds: it needs no torchvision import, which costs each rank
about as much CPU as ``import torch`` itself (measured in the README), and its gradient is a few
thousand numbers. It learns the synthetic data's class patterns too, so its loss falls.
Here in core so that core/recipefit.py can build it on the meta device (core never imports the rank side).
"""

from __future__ import annotations

MLP_HIDDEN = 64


def mlp(num_classes: int, image_size: int):
    """Two linear layers on the flattened 3-channel image (a ``torch.nn.Sequential``)."""
    import torch  # the caller has it loaded already: a rank, or a check that builds on the meta device

    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * image_size * image_size, MLP_HIDDEN),
                               torch.nn.ReLU(), torch.nn.Linear(MLP_HIDDEN, num_classes))
