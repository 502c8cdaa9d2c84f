"""The DDP Studio window (docs/gui.md): the only package that imports Qt or pyqtgraph.

Modules without Qt (series, run_metrics, load_history, form_state, preflight,
hints, run_history, run_tree) hold the view-models and are tested without a
display; the Qt modules only show them and wire signals.
"""
