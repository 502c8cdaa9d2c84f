"""A fixed FileStore path belongs to one run at a time: the claim file beside it.

Two runs on one store file join one process group and mix their gradients
(or fail with "DDP expects same model"). Before a run uses a fixed path, its
front end and then its launcher *claim* it: ``<store>.claim`` names the run
and the process that holds it (pid + create time). Every read-and-write of
the claim happens under a real OS lock on that file (``fcntl.flock`` on POSIX,
``msvcrt.locking`` on Windows), so two runs started together cannot both win.
A claim whose holder is dead (the identity test of
:mod:`ddpstudio.core.process.proctable`) is stale and is taken over; the
launcher releases the claim on every way out, and the front end once more
after the launcher is gone, in case it was killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Iterator

from ddpstudio.core.platform import Platform, current
from ddpstudio.core.process.proctable import create_time, is_alive

SUFFIX = ".claim"
LOCK_WAIT_S = 10.0  # a critical section lasts milliseconds; this only guards against a frozen holder
_WIN_LOCK_OFFSET = 1 << 20  # Windows locks are mandatory: lock a byte past the content, not the content


@dataclass(frozen=True)
class Holder:
    run_id: str
    pid: int
    create_time: float | None
    since: float

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"run {self.run_id} (pid {self.pid}, since {when})"


class ClaimHeld(Exception):
    """The path is claimed by a live run; ``str()`` is the message for the user."""

    def __init__(self, store_path: str, holder: Holder) -> None:
        self.store_path, self.holder = store_path, holder
        super().__init__(
            f"the store path {store_path} is in use by {holder.describe()}; two runs on one FileStore would "
            "join one process group. Wait for that run to end or stop it, or choose another --store-path.")


class ClaimError(OSError):
    """The claim file could not be created, locked or written."""


def claim_path(store_path: str) -> str:
    return store_path + SUFFIX


def acquire(store_path: str, run_id: str, pid: int | None = None,
            platform: Platform | None = None) -> Holder | None:
    """Claim ``store_path`` for ``run_id``, held by process ``pid`` (default: this one).

    Claiming again for the same run hands the claim to a new process (the
    front end to its launcher). Returns the stale holder taken over, if any;
    raises :class:`ClaimHeld` when another live run holds it.
    """
    pid = os.getpid() if pid is None else pid
    with _locked(claim_path(store_path), platform or current()) as fd:
        held = _read(fd)
        if held is not None and held.run_id != run_id and is_alive(held.pid, held.create_time):
            raise ClaimHeld(store_path, held)
        _write(fd, Holder(run_id, pid, create_time(pid), time.time()))
    return held if held is not None and held.run_id != run_id else None


def release(store_path: str, run_id: str, platform: Platform | None = None) -> bool:
    """Give the path back if ``run_id`` holds it through this process or a dead one.

    A front end calls this after its launcher has gone; while the launcher
    still lives (it holds the claim for the same run) nothing changes.
    ``False`` when nothing was released.
    """
    platform = platform or current()
    path = claim_path(store_path)
    if not os.path.exists(path):
        return False
    with _locked(path, platform) as fd:
        held = _read(fd)
        if held is None or held.run_id != run_id:
            return False
        if held.pid != os.getpid() and is_alive(held.pid, held.create_time):
            return False
        os.ftruncate(fd, 0)  # empty means free, in case the file cannot be removed (Windows: open elsewhere)
        if not platform.is_windows:
            os.unlink(path)  # under the lock; waiters see the file changed and start over
    if platform.is_windows:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return True


def holder(store_path: str) -> Holder | None:
    """The live holder of the path, read without locking (for messages and checks)."""
    try:
        with open(claim_path(store_path), "rb") as fh:
            held = _parse(fh.read(65536))
    except OSError:
        return None
    return held if held is not None and is_alive(held.pid, held.create_time) else None


# -- the file and its lock ----------------------------------------------------
@contextlib.contextmanager
def _locked(path: str, platform: Platform) -> Iterator[int]:
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            # No makedirs: a fixed store path's folder must exist (core/validate.py check_store_path).
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        except OSError as exc:
            raise ClaimError(f"cannot create the claim file {path}: {exc.strerror or exc}") from None
        try:
            if _try_lock(fd, platform) and _same_file(fd, path, platform):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        if time.monotonic() > deadline:
            raise ClaimError(f"could not lock the claim file {path} within {LOCK_WAIT_S:g} s")
        time.sleep(0.02)
    try:
        yield fd
    finally:
        _unlock(fd, platform)
        os.close(fd)


def _try_lock(fd: int, platform: Platform) -> bool:
    if platform.is_windows:
        import msvcrt  # Windows only

        os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        except OSError:
            return False
        return True
    import fcntl  # POSIX only

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int, platform: Platform) -> None:
    with contextlib.suppress(OSError):
        if platform.is_windows:
            import msvcrt

            os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_UN)


def _same_file(fd: int, path: str, platform: Platform) -> bool:
    """POSIX: the path still names the file we locked (a release may have unlinked it meanwhile)."""
    if platform.is_windows:
        return True  # an open file cannot be unlinked there
    try:
        a, b = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _read(fd: int) -> Holder | None:
    os.lseek(fd, 0, os.SEEK_SET)
    return _parse(os.read(fd, 65536))


def _parse(data: bytes) -> Holder | None:
    """The holder a claim names; ``None`` for an empty (released) or unreadable one."""
    try:
        raw = json.loads(data.decode("utf-8"))
        return Holder(str(raw["run_id"]), int(raw["pid"]),
                      None if raw.get("create_time") is None else float(raw["create_time"]), float(raw["since"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _write(fd: int, held: Holder) -> None:
    data = json.dumps(asdict(held)).encode("utf-8")
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, data)
    os.fsync(fd)
