"""What a checkpoint must prove before a run resumes from it, checked without importing torch.

Beside ``checkpoint.pt`` the recipe writes ``checkpoint.json`` (the sidecar):
the payload's SHA-256 and size, the model's name and layout, and where
training stood. The sidecar is written atomically *after* the payload is in
place, so a payload without a matching sidecar is either damaged or not ours.
:func:`verify` checks all of it and also reads the payload's pickle opcodes
(without running them) so a file that would import anything but tensors and
an ``OrderedDict`` is refused before any rank exists: ``torch.load(...,
weights_only=True)`` in the rank then only sees files that passed here.
docs/checkpoints.md describes the format and the guarantees.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickletools
import zipfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable

from ddpstudio.core.plan import CHECKPOINT_NAME

SIDECAR_NAME = "checkpoint.json"
FORMAT_VERSION = 1

# Everything torch.save puts into our payload's pickle; nothing else may be imported by it.
_STORAGES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
ALLOWED_GLOBALS = frozenset(
    {"collections OrderedDict", "torch._utils _rebuild_tensor_v2", "torch._utils _rebuild_parameter"}
    | {f"torch {kind}Storage" for kind in _STORAGES})
# Opcodes that import or call something by a name we could not read statically.
_OPAQUE_OPCODES = frozenset({"STACK_GLOBAL", "INST", "OBJ", "EXT1", "EXT2", "EXT4"})


class CheckpointError(ValueError):
    """A checkpoint that must not be resumed from; the message says why and what to do."""


@dataclass(frozen=True)
class CheckpointInfo:
    """The sidecar's content: the payload's identity and where training stood when it was saved."""

    sha256: str
    size: int
    model: str
    layout: str  # see layout_fingerprint
    global_step: int
    epoch: int
    step_in_epoch: int
    epoch_complete: bool
    world_size: int
    epochs: int  # what the saving run was asked for (informational)
    max_steps: int | None
    format: int = FORMAT_VERSION
    accumulate: int = 1  # micro-batches per optimizer step: step_in_epoch counts optimizer steps of this many

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Any) -> "CheckpointInfo":
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        known = {f.name for f in fields(cls)}
        missing = sorted(known - set(raw) - {"format", "max_steps", "accumulate"})
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        info = cls(**{k: v for k, v in raw.items() if k in known})
        for name, kind in (("sha256", str), ("model", str), ("layout", str), ("size", int), ("global_step", int),
                           ("epoch", int), ("step_in_epoch", int), ("world_size", int), ("epochs", int)):
            if not isinstance(getattr(info, name), kind) or isinstance(getattr(info, name), bool):
                raise ValueError(f"{name} is not a {kind.__name__}")
        return info

    @property
    def next_epoch(self) -> int:
        """The epoch a resumed run starts in (0-based)."""
        return self.epoch + (1 if self.epoch_complete else 0)

    def where(self) -> str:
        """Where it stands, numbered as the progress lines number epochs (from 0)."""
        done = "complete" if self.epoch_complete else f"{self.step_in_epoch} of its steps done"
        return f"step {self.global_step} (epoch {self.epoch}, {done})"


def payload_path(directory: str | os.PathLike) -> Path:
    return Path(directory) / CHECKPOINT_NAME


def sidecar_path(directory: str | os.PathLike) -> Path:
    return Path(directory) / SIDECAR_NAME


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def layout_fingerprint(shapes: Iterable[tuple[str, Iterable[int]]]) -> str:
    """A short hash of a state dict's parameter names and shapes: equal layouts load into each other."""
    text = "\n".join(f"{name}:{'x'.join(map(str, shape))}" for name, shape in sorted(shapes))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_info(directory: str | os.PathLike) -> CheckpointInfo:
    path = sidecar_path(directory)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(
            f"{payload_path(directory)} has no {SIDECAR_NAME} beside it, so it was not saved by this version of "
            "DDP Studio (or its save was cut short); it is not loaded: start with an empty checkpoint folder") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{path} cannot be read ({exc}); the checkpoint is left as it is: "
                              "start with an empty checkpoint folder") from None
    try:
        return CheckpointInfo.from_dict(raw)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path} is not a DDP Studio checkpoint description ({exc}); "
                              "start with an empty checkpoint folder") from None


def unsafe_globals(payload: str | os.PathLike) -> list[str]:
    """What the payload's pickle would import beyond tensors and OrderedDict (read, never run).

    Raises :class:`CheckpointError` when the file is not a torch zip archive or its pickle is unreadable.
    """
    try:
        with zipfile.ZipFile(payload) as archive:
            pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if len(pickles) != 1:
                raise CheckpointError(f"{payload} is not a PyTorch checkpoint (no single data.pkl inside)")
            data = archive.read(pickles[0])
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise CheckpointError(f"{payload} is not a readable PyTorch checkpoint ({exc})") from None
    found: list[str] = []
    try:
        for op, arg, _pos in pickletools.genops(data):
            if op.name == "GLOBAL" and arg not in ALLOWED_GLOBALS:
                found.append(str(arg).replace(" ", "."))
            elif op.name in _OPAQUE_OPCODES:
                found.append(f"<{op.name} opcode>")
    except Exception as exc:  # pickletools raises ValueError and others on a damaged stream
        raise CheckpointError(f"{payload} holds a damaged pickle ({type(exc).__name__}: {exc})") from None
    return found


def verify(directory: str | os.PathLike, model: str) -> CheckpointInfo:
    """Everything a resume needs to be safe, or :class:`CheckpointError`; the files are never changed."""
    payload = payload_path(directory)
    info = read_info(directory)
    keep = "it is kept as it is; start with an empty checkpoint folder or restore a backup"
    try:
        size = payload.stat().st_size
    except OSError as exc:
        raise CheckpointError(f"{payload} cannot be read ({exc.strerror or exc})") from None
    if size != info.size:
        raise CheckpointError(f"{payload} is {size} bytes but {SIDECAR_NAME} says {info.size}: the file is "
                              f"truncated or was replaced; {keep}")
    if file_sha256(payload) != info.sha256:
        raise CheckpointError(f"{payload} does not match the checksum in {SIDECAR_NAME}: the file is damaged "
                              f"or was changed after it was saved; {keep}")
    unsafe = unsafe_globals(payload)
    if unsafe:
        raise CheckpointError(f"{payload} would run code when loaded (it imports {', '.join(unsafe[:3])}); "
                              "DDP Studio only loads tensors: it is refused and left as it is")
    if info.model != model:
        raise CheckpointError(f"{payload} was saved by a {info.model} model, not {model}: resume with "
                              f"--model {info.model}, or use another checkpoint folder")
    return info


def accumulation_mismatch(info: CheckpointInfo, accumulate: int) -> str | None:
    """Why a mid-epoch checkpoint cannot be resumed with another accumulation, or ``None``.

    Its ``step_in_epoch`` counts optimizer steps of ``info.accumulate`` micro-batches each; with another
    number the resumed run would skip a different part of the epoch. An epoch's end has nothing to skip."""
    if info.epoch_complete or info.step_in_epoch == 0 or info.accumulate == accumulate:
        return None
    return (f"the checkpoint was saved mid-epoch with {info.accumulate} micro-batch(es) per step, and this run "
            f"accumulates {accumulate}: resume with --accumulate {info.accumulate} (and the same batch size)")


def nothing_left(info: CheckpointInfo, epochs: int, max_steps: int | None) -> str | None:
    """Why a run resumed from ``info`` would train no step at all, or ``None``."""
    if max_steps is not None and info.global_step >= max_steps:
        return (f"the checkpoint is at step {info.global_step} and the run stops at step {max_steps}: nothing is "
                "left to train; raise --max-steps, or leave out --resume to start again")
    if info.next_epoch >= epochs:
        return (f"the checkpoint at step {info.global_step} has completed all {epochs} epoch(s) asked for: nothing "
                "is left to train; raise --epochs, or leave out --resume to start again")
    return None
