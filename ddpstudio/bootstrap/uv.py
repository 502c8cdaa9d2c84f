"""The uv command lines the bootstrap runs, and the environment it runs them in.

Package sources: the chosen PyTorch index goes first as an extra index, so
with uv's default ``first-index`` strategy torch and torchvision come from
PyTorch's index (the CUDA build) and everything the index lacks (Qt,
pyqtgraph, ...) from PyPI. That is the arrangement uv's PyTorch guide
describes for ``uv pip``. Everything is overridable for mirrors and tests:
see :class:`Sources`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ddpstudio.bootstrap import network
from ddpstudio.bootstrap.layout import Layout
from ddpstudio.bootstrap.pins import PINS

# Leaked from a shell or an IDE, these would make uv (or the new Python)
# look at some other environment.
_FOREIGN = ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "CONDA_PREFIX", "UV_PROJECT_ENVIRONMENT")


@dataclass(frozen=True)
class Sources:
    """Where packages come from."""

    torch_index: str
    extra_index_urls: tuple[str, ...] = ()
    default_index: str | None = None  # None: PyPI
    find_links: tuple[str, ...] = ()
    index_strategy: str | None = None  # None: uv's default, first-index

    def arguments(self) -> list[str]:
        args = ["--extra-index-url", self.torch_index]
        for url in self.extra_index_urls:
            args += ["--extra-index-url", url]
        if self.default_index:
            args += ["--default-index", self.default_index]
        for link in self.find_links:
            args += ["--find-links", link]
        if self.index_strategy:
            args += ["--index-strategy", self.index_strategy]
        return args


@dataclass(frozen=True)
class Uv:
    """uv as the bootstrap uses it: one installation's uv, cache and Pythons."""

    layout: Layout
    executable: Path
    base_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    def environment(self) -> dict[str, str]:
        """The child environment. The cache and the Pythons stay inside the
        installation (the uninstaller removes them) unless the caller set them."""
        env = {k: v for k, v in self.base_env.items() if k not in _FOREIGN}
        env.update(network.load(self.layout.network_file).environment())  # what the user saved wins
        env.setdefault("UV_CACHE_DIR", str(self.layout.cache_dir))
        env.setdefault("UV_PYTHON_INSTALL_DIR", str(self.layout.python_dir))
        return env

    def version(self) -> list[str]:
        return [str(self.executable), "--version"]

    def create_venv(self, python: str, clear: bool = False) -> list[str]:
        cmd = [str(self.executable), "venv", "--no-config", "--color", "never", "--python", python]
        if self.layout.platform.is_windows and not Path(python).is_absolute():
            # A bare version: take uv's own Python, never a stray system one
            # (or the Microsoft Store's python.exe alias).
            cmd.append("--managed-python")
        if clear:
            cmd.append("--clear")
        return cmd + [str(self.layout.env)]

    def install(self, wheel: Path, sources: Sources) -> list[str]:
        return [
            str(self.executable),
            "pip",
            "install",
            "--no-config",
            "--color",
            "never",
            "--python",
            str(self.layout.python(self.layout.env)),
            *sources.arguments(),
            # Same version, new build (a repair, a development wheel): reinstall the app.
            "--reinstall-package",
            "ddpstudio",
            str(wheel),
            *PINS,
        ]
