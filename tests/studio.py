"""Helpers for tests that run the real ``ddpstudio`` command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ddpstudio.core import protocol

SCRIPTS = Path(__file__).parent / "scripts"
TINY = ["--batch-size", "8", "--image-size", "32", "--rendezvous-timeout", "60"]


def ddpstudio(*args: str, timeout: float = 240, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddpstudio", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)


def events(stdout: str) -> list[protocol.Event]:
    parser = protocol.EventParser()
    return [ev for line in stdout.splitlines() for ev in parser.feed(line)]


def of_type(evs: list[protocol.Event], type_: str) -> list[protocol.Event]:
    return [e for e in evs if e.type == type_]


def final(evs: list[protocol.Event]) -> protocol.Event:
    [done] = of_type(evs, protocol.RUN_FINISHED)
    return done
