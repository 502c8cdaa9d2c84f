"""Does the planned recipe run fit its data, its model and this machine? Checked before any rank starts.

What the ranks would otherwise find out after they started (issue 27, exit 1 and a
traceback): a batch larger than the data, images too large to allocate, a batch of
one per rank for a model whose BatchNorm needs two values, a checkpoint of another
layout. These need the plan (ranks, per-rank batch), so they run after the policy.
"""

from __future__ import annotations

import os
from pathlib import Path

from ddpstudio.core.mlp import MLP_HIDDEN
from ddpstudio.core.plan import MLP_MODEL, Plan, RecipeSpec
from ddpstudio.core.validate import IMAGE_SUFFIXES, Problem

CIFAR_TRAIN_SAMPLES = 50_000  # torchvision's CIFAR10(train=True): data_batch_1..5, 10,000 each
VAL_FRACTION = 0.1  # rank/splits.py holds this much of a folder without train/ and val/ out for validation
FLOAT_BYTES = 4


def check_plan(plan: Plan, oversubscribe: bool = False, elsewhere: frozenset[str] = frozenset()) -> list[Problem]:
    """The problems of ``plan.recipe`` against its data, model and machine ([] for a script).
    ``elsewhere``: fields whose data lives on another machine (export-job), not checked here."""
    spec = plan.recipe
    if spec is None:
        return []
    problems: list[Problem] = []
    if "data_dir" not in elsewhere:
        problems += _too_few_samples(spec, plan.world_size)
    if not oversubscribe:
        problems += _too_large_images(spec, plan.world_size)
    if spec.batch_size == 1 and spec.model != MLP_MODEL:
        from ddpstudio.core.imagesize import single_sample_problem

        why = single_sample_problem(spec.model, spec.image_size)
        if why:
            split = (f"; with --batch-mode split, --batch-size {2 * plan.world_size} or more"
                     if plan.world_size > 1 else "")
            problems.append(Problem("batch_size", f"{why}; a batch of 1 per rank gives it one: use a batch of at "
                                                  f"least 2 per rank (--batch-size{split}), or larger images"))
    if spec.resume and "data_dir" not in elsewhere:
        problems += _other_layout(spec)
    return problems


# -- how many samples the ranks will train on -----------------------------------------------------------

def training_samples(spec: RecipeSpec, enough: int) -> tuple[int, str]:
    """(training samples, where they come from), as rank/splits.py will split them; a folder is counted
    only until ``enough`` are found (an ImageNet-size folder is not walked to the end)."""
    if spec.data == "synthetic":
        return spec.synthetic_samples, "the synthetic data"
    if spec.data == "cifar10":
        return CIFAR_TRAIN_SAMPLES, "CIFAR-10's training batches"
    root = Path(str(spec.data_dir))
    if (root / "train").is_dir() and (root / "val").is_dir():
        return count_images(root / "train", enough), f"{root / 'train'}"
    wanted = enough + max(1, round(enough * VAL_FRACTION)) + 1
    n = count_images(root, wanted)
    held = min(n - 1, max(1, round(n * VAL_FRACTION))) if n > 1 else 0  # rank/splits.py hold_out
    return n - held, f"{root} ({n} images, {held} held out for validation)"


def count_images(root: Path, stop_at: int) -> int:
    """Images in ``root``'s class folders, as ImageFolder finds them (torchvision/datasets/folder.py:
    ``find_classes`` takes the sub-folders, ``make_dataset`` walks each with ``followlinks=True``)."""
    n = 0
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for _dirpath, _dirs, files in os.walk(folder, followlinks=True):
            n += sum(1 for f in files if os.path.splitext(f)[1].lower() in IMAGE_SUFFIXES)
            if n >= stop_at:
                return n
    return n


def _too_few_samples(spec: RecipeSpec, world_size: int) -> list[Problem]:
    """The recipe's loader drops the last partial batch (drop_last), so one optimizer step needs
    ranks x batch x accumulate training samples (rank/recipe.py: "samples are too few")."""
    per_step = world_size * spec.batch_size * max(1, spec.accumulate)
    try:
        have, where = training_samples(spec, per_step)
    except OSError:
        return []  # an unreadable folder is core/validate.py's to name
    if have >= per_step:
        return []
    accumulated = f" x {spec.accumulate} micro-batches" if spec.accumulate > 1 else ""
    most = have // (world_size * max(1, spec.accumulate))
    fix = (f"use a batch of at most {most} per rank" if most >= 1 else
           f"use fewer ranks (--world-size {max(1, have // spec.batch_size)})" if have >= spec.batch_size else
           "use a smaller batch and fewer ranks")
    more = "more --synthetic-samples" if spec.data == "synthetic" else "add data"
    return [Problem("batch_size", f"{where} gives {have} training samples, too few for one step of "
                                  f"{world_size} ranks x batch {spec.batch_size}{accumulated} ({per_step} samples); "
                                  f"{fix}, or {more}")]


# -- memory for the images ------------------------------------------------------------------------------

def image_bytes_per_rank(spec: RecipeSpec) -> int:
    """A lower bound of what one rank allocates for its images at ``spec.image_size``.

    Synthetic data: three pools of 32 noise images and a pattern per class, once for training and once
    for the held-out set (rank/data.py), and the batch built from them. Folder data: the batch and what
    the DataLoader workers prefetch (torch's default prefetch_factor is 2 per worker). The perceptron's
    first layer holds 64 weights per input value, kept four times (weights, gradient, momentum, DDP's bucket).
    """
    image = 3 * spec.image_size * spec.image_size * FLOAT_BYTES
    if spec.data == "synthetic":
        images = 3 * 32 + 2 * spec.num_classes + spec.batch_size
    else:
        images = spec.batch_size * (1 + 2 * (spec.workers or 0))
    if spec.model == MLP_MODEL:
        images += 4 * MLP_HIDDEN
    return images * image


def _too_large_images(spec: RecipeSpec, world_size: int) -> list[Problem]:
    import psutil

    need = world_size * image_bytes_per_rank(spec)
    free = psutil.virtual_memory().available
    if need <= free:
        return []
    return [Problem("image_size", f"{spec.image_size}x{spec.image_size} images need at least {need / 2**30:.1f} "
                                  f"GiB over {world_size} rank(s) for the data alone, and this machine has "
                                  f"{free / 2**30:.1f} GiB free; choose a smaller --image-size (the default is "
                                  f"{RecipeSpec.image_size}), or add --oversubscribe if you know it fits")]


# -- the checkpoint's layout ----------------------------------------------------------------------------

def class_count(spec: RecipeSpec) -> int:
    """The classes the run's model will have: as rank/splits.py and ImageFolder's ``find_classes`` see them."""
    if spec.data == "synthetic":
        return spec.num_classes
    if spec.data == "cifar10":
        return 10
    root = Path(str(spec.data_dir))
    if (root / "train").is_dir() and (root / "val").is_dir():
        root = root / "train"
    return sum(1 for p in root.iterdir() if p.is_dir())


def model_layout(spec: RecipeSpec, classes: int) -> str:
    """The layout fingerprint (core/checkpoint.py) of the model this run builds, built on PyTorch's meta
    device: shapes only, no memory, no weights."""
    import warnings

    import torch

    from ddpstudio.core.checkpoint import layout_fingerprint

    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")  # inception/googlenet warn about their default init
        if spec.model == MLP_MODEL:
            from ddpstudio.core.mlp import mlp

            net = mlp(classes, spec.image_size)
        else:
            import torchvision

            net = torchvision.models.get_model(spec.model, weights=None, num_classes=classes)
    return layout_fingerprint((name, tuple(t.shape)) for name, t in net.state_dict().items())


def _other_layout(spec: RecipeSpec) -> list[Problem]:
    from ddpstudio.core.checkpoint import CheckpointError, payload_path, read_info

    try:
        info = read_info(spec.checkpoint_dir)
        classes = class_count(spec)
    except (CheckpointError, OSError):
        return []  # core/validate.py check_resume has said what is wrong with it
    if model_layout(spec, classes) == info.layout:
        return []
    size = f", {spec.image_size}x{spec.image_size} images" if spec.model == MLP_MODEL else ""  # its input layer
    return [Problem("resume", f"{payload_path(spec.checkpoint_dir)} holds a {info.model} of another layout than "
                              f"this run's ({classes} classes from the {spec.data} data{size}): resume with the "
                              "data it was trained with, or use another checkpoint folder")]
