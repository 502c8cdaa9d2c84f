"""Checkpoints written atomically with their sidecar, and loaded with ``weights_only=True``.

A killed run never leaves half a file behind; a full disk leaves the previous
checkpoint as it was and says so; a checkpoint is only loaded after
:func:`ddpstudio.core.checkpoint.verify` has matched it to its sidecar.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import torch

from ddpstudio.core import checkpoint as meta
from ddpstudio.core.plan import CHECKPOINT_NAME

DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO})


class CheckpointSaveError(OSError):
    """Saving failed (a full or read-only disk); the previous checkpoint is untouched."""


def checkpoint_path(directory: str | os.PathLike) -> Path:
    return Path(directory) / CHECKPOINT_NAME


def _disk_errno(exc: BaseException) -> int | None:
    """The errno behind ``exc``: torch.save hides ENOSPC under ``enforce fail at inline_container.cc``."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_ERRNOS:
            return seen.errno
        seen = seen.__cause__ or seen.__context__
    return None


def _free(folder: Path) -> str:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return "free space unknown"
    return f"{free / 2**20:.1f} MiB free"


def save_atomic(state: dict[str, Any], path: str | os.PathLike, info: dict[str, Any] | None = None) -> Path:
    """Write payload and sidecar to temp files in the same folder (fsynced), then rename both over the old pair.

    ``info`` holds the sidecar's fields other than the checksum and size. Raises
    :class:`CheckpointSaveError` (naming the folder and its free space) when the disk refuses.
    """
    path = Path(path)
    sidecar = meta.sidecar_path(path.parent)
    tmp, side_tmp = (p.with_name(f".{p.name}.tmp-{os.getpid()}") for p in (path, sidecar))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        if info is not None:  # both files written before either rename: a full disk cannot split the pair
            described = meta.CheckpointInfo(sha256=meta.file_sha256(tmp), size=tmp.stat().st_size, **info)
            with open(side_tmp, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(described.to_dict(), indent=2))
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
        if info is not None:
            os.replace(side_tmp, sidecar)
    except (OSError, RuntimeError) as exc:
        code = _disk_errno(exc)
        if code is None:
            raise
        what = "is read-only" if code == errno.EROFS else "is full" if code != errno.EIO else "failed to write"
        raise CheckpointSaveError(code, f"could not save the checkpoint: the disk holding {path.parent} {what} "
                                        f"({_free(path.parent)}); the previous checkpoint there is unchanged; "
                                        "free some space or choose another --checkpoint-dir") from None
    finally:
        tmp.unlink(missing_ok=True)
        side_tmp.unlink(missing_ok=True)
    return path


def remove_partial(directory: str | os.PathLike) -> list[Path]:
    """Delete temp files a killed save left behind; returns what was removed."""
    removed = []
    for name in (CHECKPOINT_NAME, meta.SIDECAR_NAME):
        for tmp in Path(directory).glob(f".{name}.tmp-*"):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def layout(state_dict: dict[str, Any]) -> str:
    return meta.layout_fingerprint((name, tuple(t.shape)) for name, t in state_dict.items())


def load(directory: str | os.PathLike, device: torch.device,
         model: str) -> tuple[dict[str, Any], meta.CheckpointInfo]:
    """Verify against the sidecar, then load tensors only, onto this rank's device.

    Raises :class:`ddpstudio.core.checkpoint.CheckpointError` with one clear line for anything else.
    """
    info = meta.verify(directory, model)
    return load_tensors(checkpoint_path(directory), device), info


def load_tensors(path: Path, device: torch.device) -> dict[str, Any]:
    """``torch.load`` with ``weights_only=True``: a pickle that wants to import anything else is refused."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise meta.CheckpointError(f"{path} cannot be loaded safely ({first}); it is kept as it is") from None
    needed = ("model", "optimizer", "scaler", "epoch", "step_in_epoch", "epoch_complete", "global_step")
    missing = [k for k in needed if k not in state] if isinstance(state, dict) else list(needed)
    if missing:
        raise meta.CheckpointError(f"{path} is not a DDP Studio checkpoint (no {', '.join(missing)})")
    return state
