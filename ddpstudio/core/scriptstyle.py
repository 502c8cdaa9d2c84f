"""Which script style a user's script needs (spawn, env or args), and the one-line reason the user is told.

The PyTorch examples' ImageNet script (and the PyTorch-on-Windows blog's
command) takes ``--multiprocessing-distributed`` and spawns one process per
GPU; the official DDP tutorial calls ``mp.spawn(demo_fn, ..., nprocs=...)``.
Started once per rank, such a script starts N x N processes, so the front
ends suggest ``--script-style spawn`` when they see either sign. A spawn call
that only runs when an argument asks for it (ImageNet's ``if
args.multiprocessing_distributed:``, not given) is no such sign: that script
is one process per rank, args style (core/scriptgate.py reads the gating).
A script that spawns nothing but is written for torchrun (it reads
``LOCAL_RANK``, or joins by ``env://``) gets env style (core/envstyle.py); one
that runs torchrun itself and reads none of its variables, spawn style
(core/ownlauncher.py), as does one whose library starts its ranks
(Lightning's ddp_spawn, Ignite's Parallel with nproc_per_node:
core/liblaunch.py).
Pure: text in, suggestion out (reading the file is :func:`read_source`'s job).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core.argsfit import declares_any, declares_by_name, parser_all_here
from ddpstudio.core.envstyle import LOCAL_RANK_OPTIONS, env_sign, parses_any, torchrun_sign
from ddpstudio.core.liblaunch import library_launch
from ddpstudio.core.localspawn import local_spawn
from ddpstudio.core.ownlauncher import runs_launcher
from ddpstudio.core.plan import DEFAULT_DIST_ARGS
from ddpstudio.core.scriptargs import parse_script
from ddpstudio.core.scriptgate import Gate, dotted, gate

SPAWN_FLAG = "--multiprocessing-distributed"
MAX_SOURCE_BYTES = 2_000_000
SPAWN_FUNCTIONS = ("spawn", "start_processes")
MODULE_NAMES = ("mp", "multiprocessing", "torch.multiprocessing")
# Modules whose spawn()/start_processes() start processes, imported under any name.
SPAWN_MODULES = ("torch.multiprocessing", "multiprocessing", "torch.distributed.elastic.multiprocessing")
# The options the args-style template appends: their values are the launcher's, unknown while choosing.
TEMPLATE_OPTIONS = tuple(t for t in DEFAULT_DIST_ARGS.split() if t.startswith("--"))
# For a script that does not parse (another Python's syntax): the same calls, not in a comment.
_SPAWN_CALL = re.compile(r"^[^#\n]*?(?<![\w.])(?P<call>(?:torch\.)?(?:multiprocessing|mp)\.(?:spawn|start_processes))\s*\(",
                         re.MULTILINE)


@dataclass(frozen=True)
class StyleSuggestion:
    """The style a script seems to need, and the one-line reason shown to the user."""

    style: str
    why: str

    @property
    def spawns(self) -> bool:
        return self.style == "spawn"


@dataclass(frozen=True)
class SpawnCall:
    """A call that starts processes: its dotted name as written, line, and node (None: found by text)."""

    name: str
    line: int
    node: ast.Call | None = None


def suggest_style(source: str | None, args: Sequence[str] = (), path: str | None = None) -> StyleSuggestion | None:
    """Spawn style when the arguments ask the script to spawn, or its source calls a spawn function that
    runs with them; args style, said why, when every such call is off with these arguments; else None.
    ``path``: the script's file, whose project's own modules a called launch function is read from."""
    if any(a == SPAWN_FLAG or a.startswith(SPAWN_FLAG + "=") for a in args):
        return StyleSuggestion("spawn", f"its arguments contain {SPAWN_FLAG}: the script starts one process "
                                        "per GPU itself")
    tree = parse_script(source)
    folder = str(Path(path).expanduser().parent) if path else None  # where a config file it names may be
    library = library_launch(tree, args, folder)  # Lightning's spawn strategies, Ignite's Parallel(nproc_per_node)
    if library is not None:
        return StyleSuggestion("spawn", library.why)
    calls = spawn_calls(source or "", tree)
    if not calls:
        return _launcher_style(tree, path) or _env_style(tree)
    gates = [gate(tree, c.node, args, TEMPLATE_OPTIONS) if tree is not None else None for c in calls]
    for call, found in zip(calls, gates):
        if found is None or found.runs:
            return StyleSuggestion("spawn", f"the script calls {call.name}() (line {call.line}): it starts its own "
                                            "ranks")
    for call, found in zip(calls, gates):
        if found.runs is None:
            return StyleSuggestion("spawn", f"the script calls {call.name}() (line {call.line}): it starts its own "
                                            f"ranks, unless `{found.condition}` (line {found.line}) is "
                                            f"{_truth_word(not found.must_hold)}, which cannot be told from its "
                                            f"arguments{_reading(found, ' (', ')')}")
    call, found = calls[0], gates[0]
    return StyleSuggestion("args", f"the script calls {call.name}() (line {call.line}) only when "
                                   f"`{found.condition}` (line {found.line}) is {_truth_word(found.must_hold)}, and "
                                   f"with its arguments it is not{_reading(found, ' (', ')')}: one process per rank")


def args_style_why(source: str | None, template_given: bool = False) -> str:
    """Why a script with no suggestion (or with a --dist-args template) runs in args style, in one clause."""
    if template_given:
        return "a --dist-args template was given: each rank gets it appended"
    tree = parse_script(source)
    taken = [o for o in TEMPLATE_OPTIONS if tree is not None and declares_any(tree, (o,))]
    if taken:
        return f"the script takes the args template's {', '.join(taken)}: each rank gets the template appended"
    return ("nothing in the script says torchrun or that it starts its own ranks: each rank gets the args "
            f"template appended ({DEFAULT_DIST_ARGS.split()[0]} ...)")


def _env_style(tree: ast.Module | None) -> StyleSuggestion | None:
    """Env style for a script written for torchrun (core/envstyle.py), unless it declares one of the args
    template's options in either spelling: then args style fits (the template follows its spelling:
    core/argsfit.py), and is what happens with no suggestion.

    Env style too for a script that takes torch.distributed.launch's ``--local_rank`` and none of the template's
    options (timm's train.py: its set-up, ``timm.utils.init_distributed_device``, reads the variables in another
    module), and for one whose parser, all in the file (``parse_args``, no ``parse_known_args``, no
    ``parents=``), takes none of them: args style would append options such a parser refuses ("unrecognized
    arguments", before any training), while torchrun's variables cost nothing to a script that does not read
    them. Not where an option is declared from a variable: it may be one of the template's."""
    if tree is None or declares_any(tree, TEMPLATE_OPTIONS):
        return None
    sign = env_sign(tree)
    option = parses_any(tree, LOCAL_RANK_OPTIONS)
    also = f"; it takes {option}, which each rank gets as torch.distributed.launch gave it" if option else ""
    if sign is not None:
        return StyleSuggestion("env", sign.why() + also)
    if declares_by_name(tree):  # an option declared from a variable may be one of the template's
        return None
    if option is not None:
        return StyleSuggestion("env", f"the script takes {option}, the option torch.distributed.launch gave each "
                                      "rank beside torchrun's environment variables, and none of the args template's "
                                      f"({', '.join(TEMPLATE_OPTIONS)}): each rank gets both")
    if parser_all_here(tree):  # parse_args() on a parser all of whose options are declared here
        return StyleSuggestion("env", "the script's argument parser takes none of the args template's options "
                                      f"({', '.join(TEMPLATE_OPTIONS)}) and would refuse them: each rank gets "
                                      "torchrun's environment variables instead")
    return None


def _launcher_style(tree: ast.Module | None, path: str | None = None) -> StyleSuggestion | None:
    """Spawn style for a script that runs torchrun itself (core/ownlauncher.py), or calls a function of its own
    project that starts processes (core/localspawn.py), unless it reads torchrun's variables: then it checks
    whether it is a rank already (Ultralytics' ``LOCAL_RANK == -1``), and env style makes each copy one."""
    if tree is None or torchrun_sign(tree) is not None:
        return None
    found = runs_launcher(tree)
    if found is not None:
        return StyleSuggestion("spawn", f"the script runs {found.name} itself (line {found.line}): it starts its "
                                        "own ranks")
    local = local_spawn(tree, path, _starts_processes)
    return StyleSuggestion("spawn", local.why()) if local is not None else None


def _starts_processes(path: Path) -> tuple[str, int] | None:
    """A project file's first spawn call, else its run of a launcher: what it is and its line (core/localspawn.py)."""
    source = read_source(path)
    tree = parse_script(source)
    if tree is None:
        return None
    calls = spawn_calls(source or "", tree)
    if calls:
        return f"{calls[0].name}()", calls[0].line
    found = runs_launcher(tree)
    return (found.name, found.line) if found is not None else None


def _truth_word(value: bool) -> str:
    return "true" if value else "false"


def _reading(found: Gate, lead: str, end: str) -> str:
    """``(--multiprocessing-distributed not given)``: what the condition reads of the arguments."""
    said = [r.said() for r in found.reads]
    return f"{lead}{', '.join(said)}{end}" if said else ""


def spawn_call(source: str) -> tuple[str, int] | None:
    """The first ``mp.spawn(...)``-like call in ``source`` (its dotted name and line), code only."""
    calls = spawn_calls(source, parse_script(source))
    return (calls[0].name, calls[0].line) if calls else None


def spawn_calls(source: str, tree: ast.Module | None) -> list[SpawnCall]:
    """Every ``mp.spawn(...)``-like call, in line order; by text when the source does not parse."""
    if tree is None:
        return [SpawnCall(m.group("call"), source.count("\n", 0, m.start("call")) + 1)
                for m in _SPAWN_CALL.finditer(source)]
    modules, functions = _spawn_names(tree)
    found = []
    for node in ast.walk(tree):
        name = dotted(node.func) if isinstance(node, ast.Call) else None
        if name is None:
            continue
        module, _, function = name.rpartition(".")
        if (function in SPAWN_FUNCTIONS and module in modules) or (not module and name in functions):
            found.append(SpawnCall(name, node.lineno, node))
    return sorted(found, key=lambda c: (c.line, c.node.col_offset))


def _spawn_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names the spawn modules and functions go by here: ``import torch.multiprocessing as tmp``,
    ``from torch.multiprocessing import start_processes``."""
    modules, functions = set(MODULE_NAMES), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name in SPAWN_MODULES)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if f"{node.module}.{a.name}" in SPAWN_MODULES:
                    modules.add(a.asname or a.name)
                elif node.module in SPAWN_MODULES and a.name in SPAWN_FUNCTIONS:
                    functions.add(a.asname or a.name)
    return modules, functions


def read_source(path: str | Path) -> str | None:
    """The script's text (its first 2 MB), or None when it cannot be read."""
    try:
        with open(Path(path).expanduser(), "rb") as fh:
            return fh.read(MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
