"""Checkpoints written atomically: a killed run never leaves half a file behind."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ddpstudio.core.plan import CHECKPOINT_NAME


def checkpoint_path(directory: str | os.PathLike) -> Path:
    return Path(directory) / CHECKPOINT_NAME


def save_atomic(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write to a temp file in the same folder, fsync, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def remove_partial(directory: str | os.PathLike) -> list[Path]:
    """Delete temp files a killed save left behind; returns what was removed."""
    removed = []
    for tmp in Path(directory).glob(f".{CHECKPOINT_NAME}.tmp-*"):
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


def load(path: str | os.PathLike, device: torch.device) -> dict[str, Any]:
    """Load onto this rank's device (the saving rank's device may not exist here)."""
    return torch.load(path, map_location=device, weights_only=False)
