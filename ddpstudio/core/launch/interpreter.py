"""The interpreter a rank runs in: on Windows the real one, not a virtual environment's stub.

A Windows venv's ``Scripts\\python.exe`` (CPython's venv launcher since 3.7.2,
bpo-34977, and the one uv copies in) is a small program that starts the base
interpreter as a child: every rank would be two processes, and the pid we
record, meter and clean up would be the idle stub (uv #12151). The base
interpreter started with ``__PYVENV_LAUNCHER__`` set to the venv's
``python.exe`` runs in that venv exactly as the stub would have made it
(CPython's getpath: ``test_getpath.test_venv_win32``). POSIX venvs link to the
real binary: nothing to do there.
"""

from __future__ import annotations

import ntpath
import os
import sys
from dataclasses import dataclass, field
from typing import Callable

from ddpstudio.core.platform import Platform

VENV_LAUNCHER_ENV = "__PYVENV_LAUNCHER__"


@dataclass(frozen=True)
class Interpreter:
    """What to start for a rank, and the environment it needs for that."""

    executable: str
    env: dict[str, str] = field(default_factory=dict)


def rank_interpreter(python: str, platform: Platform, *, base_executable: str | None = None,
                     in_venv: bool | None = None, exists: Callable[[str], bool] = os.path.exists) -> Interpreter:
    """``python`` itself, or on Windows in a venv the base interpreter told which venv it runs in.

    Defaults describe this process (``sys._base_executable``, ``sys.prefix``), which is
    where ``python`` comes from.
    """
    if not platform.is_windows:
        return Interpreter(python)
    base = base_executable if base_executable is not None else getattr(sys, "_base_executable", "")
    venv = in_venv if in_venv is not None else sys.prefix != sys.base_prefix
    if not (venv and base) or ntpath.normcase(base) == ntpath.normcase(python):
        return Interpreter(python)
    if ntpath.basename(base).lower() == "pythonw.exe":  # ranks want the console interpreter
        base = ntpath.join(ntpath.dirname(base), "python.exe")
    if not exists(base):
        return Interpreter(python)
    return Interpreter(base, {VENV_LAUNCHER_ENV: python})
