"""When a script's own arguments and the ``--dist-args`` template set the same distributed flag.

The template is appended after the user's arguments, and argparse (like most
parsers) keeps the last value, so the template's value wins. That is the rule
we keep: it names the store this run created and the world size it started,
which a value typed for another run cannot. A user who wants their own value
takes the flag out of the template. Never silent: each clash is one warning
line naming both values.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpstudio.core.launch.commands import dist_args
from ddpstudio.core.plan import Plan

DIST_FLAGS = ("--dist-url", "--dist-backend", "--world-size", "--rank")


@dataclass(frozen=True)
class Clash:
    """One flag set both by the user's arguments and by the template."""

    flag: str
    yours: str
    ours: str

    def message(self) -> str:
        return (f"your script arguments say {self.flag} {self.yours}, the --dist-args template says "
                f"{self.flag} {self.ours}: the template's value wins (it comes last, and matches the ranks and "
                f"store this run started); to keep yours, take {self.flag} out of --dist-args")


def flag_values(args: list[str]) -> dict[str, str]:
    """The last value of each distributed flag in ``args`` (``--flag value`` or ``--flag=value``)."""
    found: dict[str, str] = {}
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name not in DIST_FLAGS:
            continue
        if eq:
            found[name] = value
        elif i + 1 < len(args):
            found[name] = args[i + 1]
    return found


def clashes(plan: Plan) -> list[Clash]:
    """The flags an args-style script's own arguments set to another value than the template does;
    a value that differs per rank (``--rank``) is shown as a range."""
    script = plan.script
    if script is None or script.style != "args" or plan.world_size < 1:
        return []
    yours = flag_values(script.args)
    per_rank = [flag_values(dist_args(script.dist_args, plan, rank)) for rank in range(plan.world_size)]
    out = []
    for flag in DIST_FLAGS:
        if flag not in yours or flag not in per_rank[0]:
            continue
        values = [found.get(flag, "") for found in per_rank]
        if len(set(values)) == 1 and values[0] == yours[flag]:
            continue  # the same value twice: nothing is overridden
        ours = values[0] if len(set(values)) == 1 else f"{values[0]}..{values[-1]} (one per rank)"
        out.append(Clash(flag, yours[flag], ours))
    return out
