"""The exact Python and PyTorch that DDP Studio is tested with.

The bootstrap installs these; they must match the repository's
``constraints.txt`` (a test compares them), so the installed app runs the
same torch as the test suite.
"""

from __future__ import annotations

PYTHON_VERSION = "3.11"
TORCH = "torch==2.14.1"
TORCHVISION = "torchvision==0.29.1"
PINS: tuple[str, ...] = (TORCH, TORCHVISION)
