"""The Clean up confirmation, telling the truth: what will be deleted, which processes will be stopped,
and what cannot be deleted because a program the user did not tick holds it open. No Qt."""

from __future__ import annotations

import os

SHOWN = 6  # items listed per section before "and N more"


def _listed(items: list[str]) -> list[str]:
    out = [f"  {item}" for item in items[:SHOWN]]
    if len(items) > SHOWN:
        out.append(f"  and {len(items) - SHOWN} more")
    return out


def _norm(path: str | None) -> str:
    return os.path.normcase(os.path.abspath(path)) if path else ""


def confirmation(files: list, ours: list, foreign_ticked: list, foreign_all: list) -> str:
    """The question before cleaning. ``files``: ticked StaleStore records (``.path``); ``ours``: ticked
    processes DDP Studio started; ``foreign_*``: lock holders it did not start, ticked and all."""
    held = {_norm(p.path): p for p in foreign_all if p not in foreign_ticked}
    blocked = [f for f in files if _norm(f.path) in held]
    deletable = [f for f in files if f not in blocked]
    lines: list[str] = []
    if deletable:
        lines.append(f"Delete {len(deletable)} stale store file(s):")
        lines += _listed([f.path for f in deletable])
    if ours:
        lines.append(f"Stop {len(ours)} process(es) DDP Studio started and that were left running "
                     "(asked to end, then killed if they do not):")
        lines += _listed([p.describe() for p in ours])
    if foreign_ticked:
        lines.append(f"Stop {len(foreign_ticked)} program(s) DDP Studio did not start, which hold a stale file open "
                     "(asked to end, then killed if they do not):")
        lines += _listed([f"{p.describe()}: {p.cmdline}" for p in foreign_ticked])
    if blocked:
        lines.append(f"Cannot delete {len(blocked)} file(s): a program you did not tick holds it open "
                     "(tick that program to stop it, or close it yourself):")
        lines += _listed([f"{f.path} (held by {held[_norm(f.path)].describe()})" for f in blocked])
    return "\n".join(lines) if lines else "Nothing that is ticked can be cleaned up."
