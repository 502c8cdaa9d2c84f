"""ANSI escape codes on Windows 10's console: switched on, or not used at all.

The progress line redraws itself with ``\\r`` and ``ESC[K``. Windows 10's
console (conhost) prints ``ESC[K`` literally unless the program sets
ENABLE_VIRTUAL_TERMINAL_PROCESSING on its output handle with
SetConsoleMode. :func:`enable_virtual_terminal` does that; when it cannot
(an older console, output that is not a console), the caller prints plain
lines instead. Windows is selected through ``core.platform``, and the
kernel32 calls go through one object, so both branches run in tests.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ddpstudio.core.platform import Platform

STD_OUTPUT_HANDLE = -11
ENABLE_VIRTUAL_TERMINAL_PROCESSING = 0x0004
INVALID_HANDLE_VALUE = -1


def declare(kernel32: Any) -> Any:
    """argtypes/restype for the three calls (HANDLE is pointer-sized: a wrong default truncates it)."""
    from ctypes import wintypes

    kernel32.GetStdHandle.argtypes, kernel32.GetStdHandle.restype = [wintypes.DWORD], wintypes.HANDLE
    kernel32.GetConsoleMode.argtypes = [wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD)]
    kernel32.GetConsoleMode.restype = wintypes.BOOL
    kernel32.SetConsoleMode.argtypes, kernel32.SetConsoleMode.restype = [wintypes.HANDLE, wintypes.DWORD], wintypes.BOOL
    return kernel32


def _kernel32() -> Any | None:
    try:
        return declare(ctypes.WinDLL("kernel32", use_last_error=True))  # type: ignore[attr-defined]
    except (AttributeError, OSError):  # not Windows
        return None


def enable_virtual_terminal(platform: Platform, kernel32: Any | None = None) -> bool:
    """True when escape codes will be interpreted (always, off Windows); False: print plain lines."""
    if not platform.is_windows:
        return True
    k = kernel32 if kernel32 is not None else _kernel32()
    if k is None:
        return False
    from ctypes import wintypes

    # GetStdHandle takes a DWORD: -11 as unsigned (0xFFFFFFF5).
    handle = k.GetStdHandle(STD_OUTPUT_HANDLE & 0xFFFFFFFF)
    if not handle or handle == INVALID_HANDLE_VALUE:
        return False
    mode = wintypes.DWORD(0)
    if not k.GetConsoleMode(handle, ctypes.pointer(mode)):
        return False  # not a console (redirected), or no console at all
    if mode.value & ENABLE_VIRTUAL_TERMINAL_PROCESSING:
        return True
    return bool(k.SetConsoleMode(handle, mode.value | ENABLE_VIRTUAL_TERMINAL_PROCESSING))
