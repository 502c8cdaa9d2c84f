"""A user's script in a run over several machines: what the join code says, and finding it on a joining machine.

Every node starts the same script; the host's command line names it either
relative to the folder the host was started from (then a joining machine
looks in the folder ``ddpstudio join`` runs from: a folder both machines
have, such as a project checkout or a synced share) or by an absolute path
(then the same path must exist on the joining machine). A joining machine
that has neither refuses before it contacts the host, so nothing starts on
either side and the host keeps waiting for a good node.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

SPAWN_REFUSED = ("--script-style spawn cannot run over several machines: such a script sets up its own rendezvous "
                 "and numbers its ranks itself (the DDP tutorial hard-codes MASTER_ADDR=localhost; the ImageNet "
                 "example takes the machine count and machine rank as --world-size/--rank, which the studio does "
                 "not hand out), so the ranks of two machines would never meet. Run it in --script-style env "
                 "(torchrun's variables) or args on every machine")


class ScriptMissing(ValueError):
    """The host's script is not on this machine; the message says where it was looked for and what to do."""


@dataclass(frozen=True)
class ScriptRef:
    """The host's script as the join code carries it (its arguments travel in the start record)."""

    path: str  # as given on the host: relative to the host's working folder, or absolute
    absolute: str  # where it is on the host
    style: str  # args | env

    def to_dict(self) -> dict[str, str]:
        return {"p": self.path, "a": self.absolute, "s": self.style}

    @classmethod
    def from_dict(cls, raw: dict) -> "ScriptRef":
        return cls(str(raw["p"]), str(raw["a"]), str(raw["s"]))


def script_ref(path: str, style: str, cwd: str | None = None) -> ScriptRef:
    """The host's reference to its script ``path`` (as typed), resolved against ``cwd`` (default: this process's)."""
    base = cwd or os.getcwd()
    return ScriptRef(path, os.path.normpath(os.path.join(base, os.path.expanduser(path))), style)


def locate(ref: ScriptRef, cwd: str | None = None, exists=os.path.isfile) -> str:
    """The script on this machine (absolute): a relative path from ``cwd`` first, then the host's absolute
    path; raises :class:`ScriptMissing` naming both places."""
    base = cwd or os.getcwd()
    expanded = os.path.expanduser(ref.path)
    candidates = [] if os.path.isabs(expanded) else [os.path.normpath(os.path.join(base, expanded))]
    candidates.append(ref.absolute)
    for candidate in dict.fromkeys(candidates):
        if exists(candidate):
            return candidate
    if os.path.isabs(expanded):
        what = f"the host's script {ref.absolute} is not on this machine: copy it to the same path here"
    else:
        what = (f"the host's script {ref.path} is not on this machine (looked in {candidates[0]} and "
                f"{ref.absolute}): run 'ddpstudio join' from the folder that holds {ref.path}, or copy the "
                "script to the same path as on the host")
    raise ScriptMissing(f"{what}; nothing was started")


def local_cwd(host_cwd: str | None, isdir=os.path.isdir) -> str | None:
    """The ranks' working folder on a joining machine: the host's when it exists here, else the join's own."""
    return host_cwd if host_cwd and isdir(host_cwd) else None
