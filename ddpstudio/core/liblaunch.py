"""Does a library start the script's ranks? Lightning's spawn strategies and Ignite's ``Parallel``, read from the
script's AST and its arguments, never run.

Lightning's ``Trainer(strategy="ddp_spawn")`` (and ``ddp_fork``, ``ddp_notebook``, or a ``DDPStrategy`` with a
``start_method``) starts its processes with torch.multiprocessing whatever the environment says
(lightning/pytorch/strategies/launchers/multiprocessing.py): run once per rank under torchrun's variables, every
copy starts a group of its own, whose rank 0s fight over one port. ``strategy="ddp"`` is torchrun's (its
subprocess launcher stays out of the way under torchrun's variables). Ignite's ``idist.Parallel(...,
nproc_per_node=N)`` and ``idist.spawn`` start N processes (ignite/distributed/comp_models/native.py
``start_processes``); without ``nproc_per_node`` it takes torchrun's variables. Accelerate's
``notebook_launcher(function, num_processes=N)`` starts N processes too, and detectron2's ``launch(main,
num_gpus_per_machine)`` (its tools pass ``--num-gpus``). Such a script runs once, in spawn
style, and is given no distributed arguments: its library sets its ranks up.

A sign counts only in a script that imports the library. What an argument decides (``--trainer.strategy
ddp_spawn`` for a LightningCLI, or ``strategy: ddp_spawn`` in the file its ``--config`` names; ``--nproc_per_node 2``
for Ignite's examples) is read from the arguments as given.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core.scriptargs import UNKNOWN
from ddpstudio.core.scriptgate import dotted, evaluator

LIGHTNING = ("lightning", "pytorch_lightning")
IGNITE = "ignite"
ACCELERATE = "accelerate"
DETECTRON2 = "detectron2"
# Lightning's strategy names whose launcher spawns or forks (its strategy registry), with their
# find_unused_parameters variants.
SPAWN_STRATEGIES = ("ddp_spawn", "ddp_fork", "ddp_notebook")
LIGHTNING_CALLS = ("Trainer", "Fabric")
IGNITE_CALLS = ("Parallel", "spawn")
NPROC = "nproc_per_node"
MAX_CONFIG_BYTES = 1_000_000
Evaluate = Callable[[ast.AST | None], object]


@dataclass(frozen=True)
class LibraryLaunch:
    """Why a library starts the script's ranks, in the words of the style line."""

    why: str


def library_launch(tree: ast.Module | None, args: Sequence[str] = (), cwd: str | None = None) -> LibraryLaunch | None:
    """The library that starts this script's ranks with these arguments (a config file they name is read from
    ``cwd``, the folder the script runs in), or None."""
    if tree is None:
        return None
    imported = imported_roots(tree)
    if not imported & {*LIGHTNING, IGNITE, ACCELERATE, DETECTRON2}:
        return None
    value = evaluator(tree, args)
    if imported & set(LIGHTNING):
        found = _lightning(tree, args, cwd, value)
        if found is not None:
            return found
    if IGNITE in imported:
        found = _ignite(tree, args, value)
        if found is not None:
            return found
    if ACCELERATE in imported:
        found = _accelerate(tree, value)
        if found is not None:
            return found
    if DETECTRON2 in imported:
        return _detectron2(tree, args, value)
    return None


def spawn_strategy(name: object) -> bool:
    return isinstance(name, str) and any(name == s or name.startswith(s + "_") for s in SPAWN_STRATEGIES)


def imported_roots(tree: ast.Module) -> set[str]:
    """The top-level packages the script imports (absolute imports only)."""
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


def _calls(tree: ast.Module, names: tuple[str, ...]) -> list[ast.Call]:
    return sorted((node for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and (dotted(node.func) or "").rpartition(".")[2] in names), key=lambda c: c.lineno)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _spelled(name: str, node: ast.expr, value: object) -> str:
    """``strategy="ddp_spawn"`` as written, or ``strategy=args.strategy, which is "ddp_spawn" here``."""
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    if isinstance(node, ast.Constant):
        return f"{name}={shown}"
    return f"{name}={ast.unparse(node)}, which is {shown} here"


def _lightning(tree: ast.Module, args: Sequence[str], cwd: str | None, value: Evaluate) -> LibraryLaunch | None:
    for call in _calls(tree, LIGHTNING_CALLS):
        node = _keyword(call, "strategy")
        name = value(node)
        if node is not None and spawn_strategy(name):
            return LibraryLaunch(f"the script asks Lightning for {_spelled('strategy', node, name)} "
                                 f"(line {call.lineno}): Lightning starts the ranks itself")
    for call in _calls(tree, ("DDPStrategy",)):
        node = _keyword(call, "start_method")
        method = value(node)
        if node is not None and method in ("spawn", "fork", "forkserver"):
            return LibraryLaunch(f"the script asks Lightning for DDPStrategy({_spelled('start_method', node, method)}) "
                                 f"(line {call.lineno}): Lightning starts the ranks itself")
    for option, value in _options(args):
        if option.rpartition(".")[2].lstrip("-") == "strategy" and spawn_strategy(value):
            return LibraryLaunch(f"its arguments ask Lightning for the {value} strategy "
                                 f"({_as_given(option, value, args)}): Lightning starts the ranks itself")
    for option, value in _options(args):
        if option in ("--config", "-c"):
            found = _config_strategy(value, cwd)
            if found is not None:
                name, line = found
                return LibraryLaunch(f"its config file {value} asks Lightning for the {name} strategy (line "
                                     f"{line}): Lightning starts the ranks itself")
    return None


# A LightningCLI config's "strategy: ddp_spawn" (under trainer:), read as text: no YAML parser in the app.
_STRATEGY_LINE = re.compile(r"^\s*strategy\s*:\s*['\"]?(?P<name>[\w.]+)['\"]?\s*(?:#.*)?$")


def _config_lines(value: str, cwd: str | None) -> list[str]:
    """The config file's lines: found as given (from the working folder), else in ``cwd``."""
    for path in (Path(value), *([Path(cwd) / value] if cwd else [])):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                return fh.read(MAX_CONFIG_BYTES).splitlines()
        except OSError:
            continue
    return []


def _config_strategy(value: str, cwd: str | None) -> tuple[str, int] | None:
    """The spawning strategy the config file names, and its line (the file read once)."""
    for number, line in enumerate(_config_lines(value, cwd), 1):
        match = _STRATEGY_LINE.match(line)
        if match and spawn_strategy(match.group("name")):
            return match.group("name"), number
    return None


def _ignite(tree: ast.Module, args: Sequence[str], value: Evaluate) -> LibraryLaunch | None:
    given = next((v for option, v in _options(args) if option.lstrip("-").replace("-", "_") == NPROC), None)
    for call in _calls(tree, IGNITE_CALLS):
        name = dotted(call.func) or ""
        node = _keyword(call, NPROC)
        count = value(node)
        spread = any(k.arg is None for k in call.keywords)  # Parallel(backend=..., **spawn_kwargs)
        if (node is not None and not isinstance(node, ast.Constant) or spread) and given is not None:
            return LibraryLaunch(f"the script calls {name}() (line {call.lineno}) and its arguments give "
                                 f"{NPROC} {given}: Ignite starts the ranks itself")
        if node is not None and _count(count) >= 1:
            return LibraryLaunch(f"the script calls {name}({_spelled(NPROC, node, count)}) (line {call.lineno}): "
                                 "Ignite starts the ranks itself")
    return None


def _accelerate(tree: ast.Module, value: Evaluate) -> LibraryLaunch | None:
    """``notebook_launcher(function, args, num_processes=N)``: Accelerate starts N processes (elastic_launch on the
    CPU and on GPUs; accelerate/launchers.py), unless N is 1."""
    for call in _calls(tree, ("notebook_launcher",)):
        node = _keyword(call, "num_processes")
        if node is None and len(call.args) >= 3:
            node = call.args[2]
        count = value(node)
        if node is None or (count is not UNKNOWN and _count(count) < 2):
            continue  # not given (None: one process on the CPU), or one
        return LibraryLaunch(f"the script calls notebook_launcher() (line {call.lineno}): Accelerate starts the "
                             "ranks itself")
    return None


def _detectron2(tree: ast.Module, args: Sequence[str], value: Evaluate) -> LibraryLaunch | None:
    """detectron2's ``launch(main, num_gpus_per_machine, ...)`` (detectron2/engine/launch.py) starts that many
    processes when there is more than one in all; its tools give it ``args.num_gpus`` (``--num-gpus``, default 1)."""
    launchers = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and (node.module or "").startswith(DETECTRON2) for a in node.names if a.name == "launch"}
    given = next((value for option, value in _options(args) if option in ("--num-gpus", "--num_gpus")), None)
    for call in _calls(tree, tuple(launchers)):
        count = value(_keyword(call, "num_gpus_per_machine") or (call.args[1] if len(call.args) > 1 else None))
        if count is not UNKNOWN:
            many = _count(count) > 1
        else:
            many = given is not None and given.isdigit() and int(given) > 1
        if many:
            return LibraryLaunch(f"the script calls detectron2's launch() (line {call.lineno}) for more than one "
                                 "GPU: detectron2 starts the ranks itself")
    return None


def _count(value: object) -> int:
    """A number of processes as the library reads it (an int, or a digit string from the arguments); 0 if none."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def _options(args: Sequence[str]) -> list[tuple[str, str]]:
    """``--name value`` and ``--name=value`` pairs of the arguments (``-c`` too: LightningCLI's config)."""
    out = []
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            continue
        if "=" in arg:
            name, _, value = arg.partition("=")
            out.append((name, value))
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append((arg, args[i + 1]))
    return out


def _as_given(option: str, value: str, args: Sequence[str]) -> str:
    """``--trainer.strategy=ddp_spawn`` or ``--trainer.strategy ddp_spawn``, as the arguments spell it."""
    return f"{option}={value}" if f"{option}={value}" in args else f"{option} {value}"
