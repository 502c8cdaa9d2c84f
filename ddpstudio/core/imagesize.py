"""Does a torchvision model accept images of a given size? Asked of the model itself, once, then cached.

Many classifiers work at any size (adaptive pooling), but some do not:
alexnet and squeezenet pool down to nothing below about 64 and 32 pixels,
inception_v3 needs 75, the ViTs exactly 224. Rather than keep a table that
goes stale, the model is built on PyTorch's ``meta`` device (shapes only,
no memory, no weights) and one image is pushed through it; a size that fails
is refused before any rank starts, with the smallest size that works. The
verdicts are cached per torchvision version in DDP Studio's data folder.
"""

from __future__ import annotations

import json
from pathlib import Path

REFERENCE_SIZE = 224  # every torchvision classifier is built for it


def _cache_file() -> Path:
    import importlib.metadata

    from ddpstudio.core import paths

    version = importlib.metadata.version("torchvision")
    return paths.data_dir() / "cache" / f"torchvision-{version}-image-sizes.json"


def _read_cache() -> dict[str, str]:
    try:
        raw = json.loads(_cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _failure(net, size: int) -> str | None:
    """Why one image of ``size`` x ``size`` does not go through ``net``, or ``None`` when it does."""
    import torch

    try:
        with torch.no_grad():
            net(torch.empty(1, 3, size, size, device="meta"))
    except Exception as exc:  # shape checks raise RuntimeError, ValueError or AssertionError
        text = str(exc).strip().splitlines()
        return text[0][:160] if text else type(exc).__name__
    return None


def probe(model: str, size: int) -> str:
    """'' when ``model`` takes ``size``; otherwise the reason and the smallest size that works."""
    import warnings

    import torch
    import torchvision

    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")  # inception/googlenet warn about their default init
            net = torchvision.models.get_model(model, weights=None, num_classes=10).eval()
    except Exception:  # a model that cannot be built on the meta device: no verdict, no refusal
        return ""
    why = _failure(net, size)
    if why is None or _failure(net, REFERENCE_SIZE) is not None:
        return ""  # works, or the probe cannot tell (it fails even at the reference size)
    low, high = size, REFERENCE_SIZE  # low fails, high works
    while high - low > 1:
        mid = (low + high) // 2
        if _failure(net, mid) is None:
            high = mid
        else:
            low = mid
    return f"{why}; the smallest size that works is {high}"


def _verdict(key: str, find) -> str:
    """The cached verdict for ``key`` ('' = it works), found with ``find()`` on a miss and cached."""
    from ddpstudio.core.atomic import write_json

    cache = _read_cache()
    if key not in cache:
        cache[key] = find()
        try:
            write_json(_cache_file(), cache, indent=None)
        except OSError:
            pass  # a read-only data folder only costs the probe next time
    verdict = cache[key]
    return verdict if isinstance(verdict, str) else ""


def image_size_problem(model: str, size: int) -> str | None:
    """Why ``model`` cannot train on ``size``-pixel images, or ``None``. Imports torch only on a cache miss."""
    verdict = _verdict(f"{model}:{size}", lambda: probe(model, size))
    return f"{model} cannot take {size}x{size} images ({verdict}); choose a larger --image-size" if verdict else None


def _single_sample_failure(model: str, size: int) -> str:
    """'' when one ``size`` image trains through ``model``; else the first line of why not.

    Training-mode BatchNorm needs more than one value per channel: torch/nn/functional.py ``batch_norm``
    calls ``_verify_batch_size``, which raises "Expected more than 1 value per channel when training"
    when the batch times the spatial size is 1 (resnet18 at 32 px: a 1x1 map before its last BatchNorm).
    The check looks at shapes only, so it fires on the meta device too.
    """
    import warnings

    import torch
    import torchvision

    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            net = torchvision.models.get_model(model, weights=None, num_classes=10).train()
    except Exception:  # cannot be built on the meta device: no verdict, no refusal
        return ""
    why = _failure(net, size)
    return why or ""


def single_sample_problem(model: str, size: int) -> str | None:
    """Why ``model`` cannot train on one ``size``-pixel image per rank (its BatchNorm), or ``None``; cached."""
    verdict = _verdict(f"{model}:{size}:train-1", lambda: _single_sample_failure(model, size))
    return f"{model} cannot train on one {size}x{size} image at a time ({verdict})" if verdict else None
