"""Training and validation sets for the built-in recipe.

Where the validation samples come from, in order of preference:
an ImageFolder tree with ``train/`` and ``val/`` folders uses them; CIFAR-10
uses its test batch; any other dataset holds out a fixed, seeded fraction.
Synthetic data gets held-out samples of its own (same class patterns, noise
never seen in training).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import Dataset, Subset

from ddpstudio.core.plan import CIFAR_FOLDER, SYNTHETIC_VAL_SAMPLES, RecipeSpec, cifar_root
from ddpstudio.rank.data import SyntheticImages, _image_transform, build_dataset, cifar10

VAL_FRACTION = 0.1


@dataclass(frozen=True)
class Splits:
    train: Dataset
    val: Dataset
    class_names: list[str]
    source: str  # one line for the log: where the validation samples came from


def build_splits(spec: RecipeSpec) -> Splits:
    if spec.data == "synthetic":
        val = SyntheticImages(SYNTHETIC_VAL_SAMPLES, spec.num_classes, spec.image_size, spec.seed,
                              offset=spec.synthetic_samples)
        train = SyntheticImages(spec.synthetic_samples, spec.num_classes, spec.image_size, spec.seed)
        return Splits(train, val, [str(c) for c in range(spec.num_classes)],
                      f"{SYNTHETIC_VAL_SAMPLES} held-out synthetic samples")
    if spec.data == "folder":
        root = Path(str(spec.data_dir))
        if (root / "train").is_dir() and (root / "val").is_dir():
            from torchvision.datasets import ImageFolder

            from ddpstudio.rank.baddata import image_loader

            transform = _image_transform(spec.image_size)
            train, val = (ImageFolder(str(root / part), transform, loader=image_loader) for part in ("train", "val"))
            if val.classes != train.classes:
                raise ValueError(f"{root / 'val'} has classes {val.classes}, but {root / 'train'} has "
                                 f"{train.classes}; give both folders the same class sub-folders")
            return Splits(train, val, list(train.classes), f"the val folder ({len(val)} images)")
    if spec.data == "cifar10":
        root = cifar_root(spec.data_dir or ".")
        if (root / CIFAR_FOLDER / "test_batch").is_file():
            train, _ = build_dataset(spec)
            val = cifar10(str(root), False, spec.image_size)
            return Splits(train, val, list(val.classes), f"CIFAR-10's test batch ({len(val)} images)")
    full, classes = build_dataset(spec)
    names = list(getattr(full, "classes", [str(c) for c in range(classes)]))
    return Splits(*hold_out(full, VAL_FRACTION, spec.seed), names,
                  f"a held-out {VAL_FRACTION:.0%} of the data")


def hold_out(dataset: Dataset, fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """A seeded split: every rank computes the same one. At least one sample is held out."""
    n = len(dataset)
    n_val = min(n - 1, max(1, round(n * fraction))) if n > 1 else 0
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    return Subset(dataset, order[n_val:]), Subset(dataset, order[:n_val])
