"""A workaround for a reference-count bug in PySide6 6.12: ``emit()`` returns True without a reference.

``SignalInstance.emit`` and a successful ``disconnect`` hand back ``True``
without adding a reference to it, so every call from Python takes one away.
On Python 3.11, where True is not immortal, the interpreter aborts after some
thousands of signals ("Fatal Python error: bool_dealloc: deallocating True or
False"): within seconds at the launcher's event rate, and in pyqtgraph's own
signals too. :func:`install` measures whether this PySide6 has the bug and
only then wraps the two methods to add the missing reference back.
"""

from __future__ import annotations

import ctypes
import functools
import sys

_installed: bool | None = None  # None: not checked yet; then whether the wrappers are in place


def _leaks_true() -> bool:
    """Emit a few times and count: a healthy PySide6 leaves True's count where it was."""
    from PySide6.QtCore import QObject, Signal

    class Probe(QObject):
        fired = Signal()

    probe = Probe()
    before = sys.getrefcount(True)
    for _ in range(8):
        probe.fired.emit()
    lost = before - sys.getrefcount(True)
    if lost >= 8:
        incref = ctypes.pythonapi.Py_IncRef
        incref.argtypes = [ctypes.py_object]
        for _ in range(lost):
            incref(True)  # the probe's own losses
    return lost >= 8


def _give_back(method):
    incref = ctypes.pythonapi.Py_IncRef
    incref.argtypes = [ctypes.py_object]

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        if result is True:
            incref(result)  # the reference PySide6 did not add
        return result

    return wrapper


def install() -> bool:
    """Wrap ``emit``/``disconnect`` if (and only if) they leak; returns whether they do."""
    global _installed
    if _installed is None:
        from PySide6.QtCore import SignalInstance

        _installed = _leaks_true()
        if _installed:
            SignalInstance.emit = _give_back(SignalInstance.emit)
            SignalInstance.disconnect = _give_back(SignalInstance.disconnect)
    return _installed
