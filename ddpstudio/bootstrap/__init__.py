"""The environment bootstrap: turns an installed wheel + uv into a working app.

The Windows installer (installer/ddpstudio.nsi) copies uv.exe and the app's
wheel, makes a small venv holding only the wheel (no dependencies), and runs
``python -m ddpstudio.bootstrap setup``. That detects the NVIDIA driver's CUDA
version, picks the PyTorch wheel index (:mod:`cuda_index`), builds the app's
environment with uv (:mod:`environment`), verifies torch, CUDA and Gloo
(:mod:`verify`) and records what it chose (:mod:`record`).

Runs before torch or Qt exist: this package imports only the standard
library and ``ddpstudio.core.platform``. Its window is tkinter, not Qt.
"""
