"""The Qt-free core: machine inventory, launch policy, launcher, protocol.

Nothing under this package imports PySide6 or pyqtgraph (tests/test_layers.py
enforces it), so the CLI, the launcher and the GUI share exactly this logic.
"""
