"""A full or read-only disk under the run folder, turned from an exception into a finding.

The launcher writes events, logs and its result into the run folder while a
run goes on. When that disk fills up (ENOSPC, EDQUOT) or turns read-only
(EROFS), a write must not kill the launcher: :class:`GuardedWriter` keeps
the first :class:`DiskProblem` instead of raising, and the launcher stops the
run as failed with the problem's message (the folder and its free space) as
the root cause. :func:`space_problem` is the same check before a run starts.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO})
MIN_FREE_BYTES = 16 * 2**20  # a long run's events and logs; far more than a short one needs
PROBE_BYTES = 64 * 2**10


def free_bytes(folder: str | os.PathLike) -> int | None:
    try:
        return shutil.disk_usage(_existing(Path(folder))).free
    except OSError:
        return None


def _existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


@dataclass(frozen=True)
class DiskProblem:
    """A write into ``folder`` failed with ``errno``; ``free`` is what the disk had left then."""

    folder: str
    errno: int
    free: int | None

    @property
    def message(self) -> str:
        free = "free space unknown" if self.free is None else f"{self.free / 2**20:.1f} MiB free"
        move = "move DDP Studio's data folder (DDPSTUDIO_HOME) to"
        if self.errno == errno.EROFS:  # no space to free: "free some space" misled (issue 27)
            return f"the disk holding {self.folder} is read-only ({free}); {move} a writable disk"
        if self.errno in (errno.EACCES, errno.EPERM):
            return f"{self.folder} cannot be written by this user (permission denied); {move} a folder you can write to"
        what = "reported an input/output error" if self.errno == errno.EIO else "is full"
        return f"the disk holding {self.folder} {what} ({free}); free some space or {move} another disk"

    @classmethod
    def of(cls, exc: BaseException, folder: str | os.PathLike) -> "DiskProblem | None":
        """The problem behind ``exc``, or ``None`` when it is not about the disk."""
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            return cls(str(folder), exc.errno, free_bytes(folder))
        return None


def probe(folder: str | os.PathLike, size: int = PROBE_BYTES) -> DiskProblem | None:
    """Can ``size`` bytes still be written into ``folder`` (or its nearest existing parent)?"""
    base = _existing(Path(folder))
    try:
        with tempfile.TemporaryFile(dir=base) as fh:
            fh.write(b"\0" * size)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):  # a folder this user may not write: not the disk's doing
            return DiskProblem(str(folder), exc.errno, free_bytes(folder))
        return DiskProblem.of(exc, folder)
    return None


def space_problem(folder: str | os.PathLike, needed: int = MIN_FREE_BYTES) -> DiskProblem | None:
    """Before a run: is the disk under ``folder`` writable with at least ``needed`` bytes free?"""
    found = probe(folder)
    if found is not None:
        return found
    free = free_bytes(folder)
    if free is not None and free < needed:
        return DiskProblem(str(folder), errno.ENOSPC, free)
    return None


class GuardedWriter:
    """A line-buffered text file whose disk errors are kept in ``problem`` instead of raised.

    After the first problem it writes nothing more (a full disk stays full);
    errors that are not about the disk still raise.
    """

    def __init__(self, path: str | os.PathLike, folder: str | os.PathLike) -> None:
        self.folder = str(folder)
        self.problem: DiskProblem | None = None
        self._fh: TextIO | None = None
        try:
            self._fh = open(path, "a", encoding="utf-8", buffering=1)
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        problem = DiskProblem.of(exc, self.folder)
        if problem is None:
            raise exc
        self.problem = self.problem or problem

    def write(self, text: str) -> None:
        if self._fh is None or self.problem is not None:
            return
        try:
            self._fh.write(text)
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        if self._fh is None:
            return
        try:
            self._fh.close()
        except OSError as exc:  # the buffered tail could not be written
            if DiskProblem.of(exc, self.folder) is None:
                raise
        self._fh = None
