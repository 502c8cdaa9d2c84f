"""Does a user's script start its own ranks? Then it wants spawn style, and the user is told why.

The PyTorch examples' ImageNet script (and the PyTorch-on-Windows blog's
command) takes ``--multiprocessing-distributed`` and spawns one process per
GPU; the official DDP tutorial calls ``mp.spawn(demo_fn, ..., nprocs=...)``.
Started once per rank, such a script starts N x N processes, so the front
ends suggest ``--script-style spawn`` when they see either sign. Pure: text
in, suggestion out (reading the file is :func:`read_source`'s job).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

SPAWN_FLAG = "--multiprocessing-distributed"
MAX_SOURCE_BYTES = 2_000_000
SPAWN_FUNCTIONS = ("spawn", "start_processes")
MODULE_NAMES = ("mp", "multiprocessing", "torch.multiprocessing")
# For a script that does not parse (another Python's syntax): the same calls, not in a comment.
_SPAWN_CALL = re.compile(r"^[^#\n]*?(?<![\w.])(?P<call>(?:torch\.)?(?:multiprocessing|mp)\.(?:spawn|start_processes))\s*\(",
                         re.MULTILINE)


@dataclass(frozen=True)
class StyleSuggestion:
    """The style a script seems to need, and the one-line reason shown to the user."""

    style: str
    why: str


def suggest_style(source: str | None, args: Sequence[str] = ()) -> StyleSuggestion | None:
    """Spawn style when the arguments ask the script to spawn, or its source calls a spawn function."""
    if any(a == SPAWN_FLAG or a.startswith(SPAWN_FLAG + "=") for a in args):
        return StyleSuggestion("spawn", f"its arguments contain {SPAWN_FLAG}: the script starts one process "
                                        "per GPU itself")
    found = spawn_call(source or "")
    if found is not None:
        call, line = found
        return StyleSuggestion("spawn", f"the script calls {call}() (line {line}): it starts its own ranks")
    return None


def spawn_call(source: str) -> tuple[str, int] | None:
    """The first ``mp.spawn(...)``-like call in ``source`` (its dotted name and line), code only."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        match = _SPAWN_CALL.search(source)
        return (match.group("call"), source.count("\n", 0, match.start("call")) + 1) if match else None
    calls = [(node.lineno, _dotted(node.func)) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    for line, name in sorted((line, name) for line, name in calls if name):
        module, _, function = name.rpartition(".")
        if function in SPAWN_FUNCTIONS and module in MODULE_NAMES:
            return name, line
    return None


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attribute lookups on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def read_source(path: str | Path) -> str | None:
    """The script's text (its first 2 MB), or None when it cannot be read."""
    try:
        with open(Path(path).expanduser(), "rb") as fh:
            return fh.read(MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
