"""Replacing a file that another process holds open: retried briefly on Windows (issue 19, item 9).

os.replace fails for real here. On Windows: the target open in this process (CPython's open() does
not share delete, so MoveFileExW fails with WinError 5). On Linux, as root: the target made
immutable (chattr +i), so rename(2) fails with EPERM, a PermissionError as on Windows; the Windows
rule comes through the platform seam. Without root (or chattr) on Linux it cannot fail for real: skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ddpstudio.core import atomic
from ddpstudio.core.platform import LINUX, WINDOWS


class HeldTarget:
    """``path`` cannot be replaced until ``release()``."""

    def __init__(self, path: Path) -> None:
        self.path, self.handle = path, None
        if sys.platform == "win32":
            self.handle = open(path, "rb")
            return
        if os.geteuid() != 0 or not shutil.which("chattr"):
            pytest.skip("on Linux only root can make a replace fail for real (chattr +i)")
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not supported here: {done.stderr.strip()}")

    def release(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None
        elif sys.platform != "win32":
            subprocess.run(["chattr", "-i", str(self.path)], check=True, capture_output=True, timeout=30)

    def release_after(self, seconds: float) -> threading.Thread:
        thread = threading.Thread(target=lambda: (time.sleep(seconds), self.release()))
        thread.start()
        return thread


@pytest.fixture
def held(tmp_path):
    target = tmp_path / "processes.json"
    target.write_text("old", encoding="utf-8")
    hold = HeldTarget(target)
    yield hold
    hold.release()  # idempotent: the folder must be removable


def test_windows_waits_for_the_holder_to_let_go(held):
    releasing = held.release_after(0.1)
    t0 = time.monotonic()
    atomic.write_text(held.path, "new", WINDOWS)
    elapsed = time.monotonic() - t0
    releasing.join(10)
    assert held.path.read_text(encoding="utf-8") == "new"
    assert 0.1 <= elapsed < atomic.REPLACE_PATIENCE_S, elapsed
    assert [p.name for p in held.path.parent.iterdir()] == ["processes.json"]  # no temp file left


def test_windows_gives_up_after_its_patience_and_names_the_file(held):
    t0 = time.monotonic()
    source = held.path.with_name("new.tmp")
    source.write_text("new", encoding="utf-8")
    with pytest.raises(PermissionError) as caught:
        atomic.replace(source, held.path, WINDOWS, patience_s=0.3)
    assert 0.3 <= time.monotonic() - t0 < 5
    assert str(held.path) in str(caught.value) and "kept it open for 0.3 s" in str(caught.value)
    held.release()
    assert held.path.read_text(encoding="utf-8") == "old"


@pytest.mark.posix_only("a POSIX permission is no passing hold: no retry")
def test_posix_does_not_retry(held):
    t0 = time.monotonic()
    with pytest.raises(PermissionError):
        atomic.write_text(held.path, "new", LINUX)
    assert time.monotonic() - t0 < 0.1
