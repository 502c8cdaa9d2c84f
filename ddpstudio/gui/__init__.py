"""The DDP Studio window (docs/gui.md): the only package that imports Qt or pyqtgraph.

Modules without Qt (series, run_metrics, load_history, form_state, preflight,
hints, run_history, run_tree) hold the view-models and are tested without a
display; the Qt modules only show them and wire signals.
"""

import importlib.util as _util

if _util.find_spec("PySide6") is not None:  # before any signal is emitted (pyqtgraph's included)
    from ddpstudio.gui.pyside_fix import install as _install

    _install()
