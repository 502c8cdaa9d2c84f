"""What the window keeps between sessions (setup form, benchmark inputs, geometry, splitter, tab) in gui.json."""

from __future__ import annotations

from PySide6.QtCore import QByteArray

from ddpstudio.gui.form_state import SetupState


def _encode(data: QByteArray) -> str:
    return bytes(data.toBase64()).decode()


def _decode(text: str) -> QByteArray:
    return QByteArray.fromBase64(text.encode())


def restore_window(window) -> None:
    """Puts back what :func:`save_window` kept; a first start gets 90% of the screen, at most 1320 x 860."""
    s = window.settings
    window.form.set_state(SetupState.from_dict(s.get("setup")))
    window.bench_view.set_workload(window.form.state().workload)
    window.bench_view.set_inputs(s.get("bench"))
    geometry = s.get("geometry")
    if not (geometry and window.restoreGeometry(_decode(geometry))):
        screen = window.screen().availableGeometry()
        window.resize(min(1320, int(screen.width() * 0.9)), min(860, int(screen.height() * 0.9)))
    if s.get("window_state"):
        window.restoreState(_decode(s.get("window_state")))
    if s.get("splitter"):
        window.splitter.restoreState(_decode(s.get("splitter")))
    window.tabs.setCurrentIndex(int(s.get("tab", 0) or 0))


def save_window(window) -> None:
    s = window.settings
    s.set("setup", window.form.state().to_dict())
    s.set("geometry", _encode(window.saveGeometry()))
    s.set("window_state", _encode(window.saveState()))
    s.set("splitter", _encode(window.splitter.saveState()))
    s.set("tab", window.tabs.currentIndex())
    s.set("bench", window.bench_view.inputs())
    s.save()
