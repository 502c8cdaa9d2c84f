"""What two nodes must agree on before any rank starts, and the one reason they do not.

Gloo and DDP need the same torch on every rank (the wire format and the
bucket layout follow the version), the same backend and the same layout; a
Windows rank and a Linux rank cannot share a Gloo group (different
transports: libuv on Windows, TCP elsewhere). The host compares its facts
with each joining node's, the token first.
"""

from __future__ import annotations

import json
import os
import platform as std_platform
from dataclasses import asdict, dataclass

from ddpstudio import __version__
from ddpstudio.core.platform import Platform

# Test seam (documented in docs/multi-machine.md): a JSON object whose keys
# (ddpstudio, python, torch, os_family) replace what this node reports, so a
# test can play a machine with another version without another machine.
FACTS_OVERRIDE_ENV = "DDPSTUDIO_TEST_NODE_FACTS"

VERSION_NAMES = {"ddpstudio": "DDP Studio", "python": "Python", "torch": "PyTorch"}


@dataclass(frozen=True)
class NodeFacts:
    ddpstudio: str
    python: str
    torch: str
    os_family: str  # windows | posix: Gloo's transport differs between the two
    backend: str
    nodes: int
    ranks_per_node: int

    def versions(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in VERSION_NAMES}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict) -> "NodeFacts":
        return cls(**{k: (int(raw[k]) if k in ("nodes", "ranks_per_node") else str(raw[k]))
                      for k in cls.__dataclass_fields__})


def torch_version() -> str:
    """The installed torch's version without importing it (the launcher stays light)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "not installed"


def local_facts(platform: Platform, backend: str, nodes: int, ranks_per_node: int,
                environ: dict[str, str] | None = None) -> NodeFacts:
    values = {"ddpstudio": __version__, "python": std_platform.python_version(), "torch": torch_version(),
              "os_family": "windows" if platform.is_windows else "posix"}
    override = (os.environ if environ is None else environ).get(FACTS_OVERRIDE_ENV)
    if override:
        values.update({k: str(v) for k, v in json.loads(override).items() if k in values})
    return NodeFacts(backend=backend, nodes=nodes, ranks_per_node=ranks_per_node, **values)


def _family(name: str) -> str:
    return "Windows" if name == "windows" else "Linux/macOS"


def mismatch(host: NodeFacts, joiner: NodeFacts) -> str | None:
    """Why ``joiner`` cannot join ``host`` (the first reason, worded for the joining user), or None."""
    if host.os_family != joiner.os_family:
        return (f"this machine runs {_family(joiner.os_family)} and the host runs {_family(host.os_family)}: "
                "Gloo cannot mix Windows and Linux ranks in one run; join from a machine with the host's "
                "operating system")
    for name, label in VERSION_NAMES.items():
        mine, theirs = getattr(joiner, name), getattr(host, name)
        if mine != theirs:
            return (f"{label} versions differ: this machine has {mine}, the host has {theirs}; install the "
                    "same version on every machine (see docs/multi-machine.md)")
    if joiner.backend != host.backend:
        return f"backends differ: this machine would use {joiner.backend}, the host uses {host.backend}"
    if (joiner.nodes, joiner.ranks_per_node) != (host.nodes, host.ranks_per_node):
        return (f"layouts differ: this machine expects {joiner.nodes} nodes x {joiner.ranks_per_node} ranks, "
                f"the host runs {host.nodes} nodes x {host.ranks_per_node} ranks; use the host's current code")
    return None
