"""The trained model's weights for prediction: ``model.pt`` beside the checkpoint.

Unlike the checkpoint (which carries optimizer state for resuming), this holds
what a user needs to predict: the state dict, the torchvision model name, the
class names in label order and the input size. Loading it is two lines
(README "Using the trained model").
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ddpstudio.core.plan import MODEL_NAME
from ddpstudio.rank.checkpoint import save_atomic


def save_model(module: torch.nn.Module, directory: str | os.PathLike, model_name: str,
               class_names: list[str], image_size: int) -> Path:
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    return save_atomic({"state_dict": state, "model_name": model_name, "class_names": list(class_names),
                        "num_classes": len(class_names), "image_size": image_size},
                       Path(directory) / MODEL_NAME)
