"""Python 3.11 with PySide6 6.12: keep None, True and False alive.

PySide6 6.12's wheels (abi3) return None from every void method, and True
from ``Signal.emit()`` and ``disconnect()``, without adding a reference. That
is right on Python 3.12+, where these objects are immortal (PEP 683), and
wrong on 3.11: each call takes a reference away until CPython aborts with
"Fatal Python error: none_dealloc: deallocating None" (or bool_dealloc), after
minutes of repainting, or seconds at the launcher's event rate. :func:`install`
measures the leak and, only on a CPython before 3.12 that has it, gives these
objects the practically endless reference count 3.12 gives them by design.
"""

from __future__ import annotations

import ctypes
import sys

ENDLESS = 1 << 48  # 2.8e14 calls before it could run out; 3.12 uses a similar "immortal" count
SINGLETONS = (None, True, False, NotImplemented, Ellipsis)
_leaking: bool | None = None  # None until measured


def _leaks() -> bool:
    """Call a void method and emit a signal a few times, and count what None and True lose."""
    from PySide6.QtCore import QObject, Signal

    class Probe(QObject):
        fired = Signal()

    probe = Probe()
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(16):
        probe.setObjectName("probe")
        probe.fired.emit()
    return sys.getrefcount(None) <= none_before - 16 or sys.getrefcount(True) <= true_before - 16


def _make_endless(obj: object) -> None:
    # CPython < 3.12 (non-debug): ob_refcnt is the first field of every object.
    ctypes.c_ssize_t.from_address(id(obj)).value = ENDLESS


def install() -> bool:
    """Apply the fix if this interpreter needs it; returns whether PySide6 leaks here."""
    global _leaking
    if _leaking is None:
        _leaking = _leaks()
        old_cpython = sys.implementation.name == "cpython" and sys.version_info < (3, 12)
        if _leaking and old_cpython and not hasattr(sys, "gettotalrefcount"):
            for obj in SINGLETONS:
                _make_endless(obj)
    return _leaking
