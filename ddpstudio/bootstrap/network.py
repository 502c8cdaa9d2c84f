"""The hosts setup downloads from, and the settings that get it through a corporate network.

uv does every download. It reads a proxy from ``HTTPS_PROXY``/``HTTP_PROXY``
(``NO_PROXY`` for exceptions), trusts the system's certificate store (where
company proxies put their root certificate) with ``UV_SYSTEM_CERTS``
(uv 0.13's name; ``UV_NATIVE_TLS``/``--native-tls`` is the older, deprecated
one), and fetches Python from ``UV_PYTHON_INSTALL_MIRROR`` instead of its
default. The setup window's "Network settings" saves these next to the
installation (``network.json``) and every later uv call uses them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple


class Host(NamedTuple):
    name: str
    role: str


# uv 0.13.9 fetches CPython from releases.astral.sh first and falls back to
# the python-build-standalone releases on github.com, which redirect the
# download to a *.githubusercontent.com file host (strings in uv.exe:
# UV_ASTRAL_MIRROR_URL, https://releases.astral.sh).
HOSTS: tuple[Host, ...] = (
    Host("pypi.org", "the Python package index"),
    Host("files.pythonhosted.org", "the package index's file host"),
    Host("download.pytorch.org", "PyTorch's wheel index and files"),
    Host("releases.astral.sh", "uv's Python download mirror"),
    Host("github.com", "uv's Python download fallback (files from *.githubusercontent.com)"),
)
HOSTS_SENTENCE = ", ".join(h.name for h in HOSTS[:-1]) + f" and {HOSTS[-1].name}"
FILE_NAME = "network.json"


@dataclass(frozen=True)
class NetworkSettings:
    """What a user can set for a corporate network; empty means "uv's default"."""

    proxy: str = ""  # e.g. http://proxy.example.com:8080
    system_certs: bool = False  # trust the Windows certificate store
    python_mirror: str = ""  # replaces releases.astral.sh/github.com for Python downloads

    def environment(self) -> dict[str, str]:
        """The variables uv reads for these settings."""
        env: dict[str, str] = {}
        if self.proxy.strip():
            env["HTTPS_PROXY"] = env["HTTP_PROXY"] = self.proxy.strip()
        if self.system_certs:
            env["UV_SYSTEM_CERTS"] = "true"
        if self.python_mirror.strip():
            env["UV_PYTHON_INSTALL_MIRROR"] = self.python_mirror.strip().rstrip("/")
        return env

    def describe(self) -> str:
        parts = [f"proxy {self.proxy}" if self.proxy else "", "system certificates" if self.system_certs else "",
                 f"Python mirror {self.python_mirror}" if self.python_mirror else ""]
        return "Network settings: " + (", ".join(p for p in parts if p) or "uv's defaults") + "."


def load(path: Path) -> NetworkSettings:
    """The saved settings; defaults when there are none or the file is unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return NetworkSettings(str(data.get("proxy", "")), bool(data.get("system_certs", False)), str(data.get("python_mirror", "")))
    except (OSError, ValueError, AttributeError):
        return NetworkSettings()


def save(path: Path, settings: NetworkSettings) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(settings), indent=2), encoding="utf-8")


def help_text() -> str:
    """What to tell the network administrator, in the window and the docs."""
    hosts = "; ".join(f"{h.name} ({h.role})" for h in HOSTS)
    return (
        f"Setup downloads over HTTPS from: {hosts}. Behind a proxy, enter it below (or set HTTPS_PROXY). "
        "If the proxy inspects HTTPS, tick \"Use the system's certificates\" (uv's UV_SYSTEM_CERTS). "
        "If github.com is blocked, a Python download mirror (uv's UV_PYTHON_INSTALL_MIRROR) replaces it."
    )
