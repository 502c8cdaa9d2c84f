"""The exact Python, PyTorch and PySide6 that DDP Studio is tested with.

The bootstrap installs these; they must match the repository's
``constraints.txt`` (a test compares them), so the installed app runs the
same torch as the test suite.
"""

from __future__ import annotations

PYTHON_VERSION = "3.11"
TORCH = "torch==2.14.1"
TORCHVISION = "torchvision==0.29.1"
# PySide6 6.12.0 drops references to None/True on Python 3.11 (see constraints.txt).
PYSIDE = ("PySide6-Essentials==6.11.3", "shiboken6==6.11.3")
PINS: tuple[str, ...] = (TORCH, TORCHVISION, *PYSIDE)
