"""DDP Studio: point-and-click PyTorch DDP training.

Kept import-light on purpose: ranks import ``ddpstudio.report`` and the
rank-side package, which must not pull in Qt, torch or the CLI.
"""

__version__ = "0.1.0"
