"""Datasets for the built-in recipe: learnable synthetic images, a folder, CIFAR-10."""

from __future__ import annotations


import torch
from torch.utils.data import Dataset

from ddpstudio.core.plan import RecipeSpec, cifar_root


class SyntheticImages(Dataset):
    """Images that are a per-class pattern plus noise, so loss really falls.

    Deterministic in (seed, index): every rank sees the same sample for the
    same index, which DistributedSampler relies on. Generated on the fly, so
    the demo needs no download and no disk.
    """

    def __init__(self, samples: int, classes: int, size: int, seed: int = 0, offset: int = 0) -> None:
        # offset: where this set's noise starts; a held-out set starts past the training samples.
        self.samples, self.classes, self.size, self.seed, self.offset = samples, classes, size, seed, offset
        g = torch.Generator().manual_seed(seed)
        # Faint patterns under strong noise: learnable in tens of steps, not in one.
        self.prototypes = 0.5 * torch.randn(classes, 3, size, size, generator=g)

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        label = index % self.classes
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.offset + index)
        noise = torch.randn(3, self.size, self.size, generator=g)
        return self.prototypes[label] + noise, label


def _image_transform(size: int):
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.Resize(size),
            transforms.CenterCrop(size),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )


def build_dataset(spec: RecipeSpec) -> tuple[Dataset, int]:
    """The dataset and its number of classes."""
    if spec.data == "synthetic":
        return SyntheticImages(spec.synthetic_samples, spec.num_classes, spec.image_size, spec.seed), spec.num_classes
    if spec.data == "folder":
        from torchvision.datasets import ImageFolder

        ds = ImageFolder(str(spec.data_dir), transform=_image_transform(spec.image_size))
        return ds, len(ds.classes)
    if spec.data == "cifar10":
        from torchvision.datasets import CIFAR10

        ds = CIFAR10(str(cifar_root(spec.data_dir or ".")), train=True, download=False,
                     transform=_image_transform(spec.image_size))
        return ds, 10
    raise ValueError(f"unknown data source {spec.data!r}: use synthetic, folder or cifar10")
