"""Does a script run a distributed launcher itself? Read from its AST, never run.

Some scripts start their ranks by running torchrun on themselves or on a
file they write: Ultralytics' trainer runs ``python -m torch.distributed.run
--nproc_per_node N <generated file>`` through ``subprocess.run`` when it is
not a rank yet, and "self-launching" scripts do the same with ``__file__``.
Started once per rank (args or env style, a script that does not check
torchrun's variables), each copy starts a group of its own: N copies of an
N-rank run, sharing nothing. Started once (spawn style), it is one run.

A sign is a launcher named where a process is started from: ``torchrun``,
``torch.distributed.run`` or ``torch.distributed.launch`` as a string of the
code (a command list's item, a command line; ``accelerate launch`` too) in a
file that starts processes
(``subprocess``, ``os.system``, ``os.exec*``...), or torch's launcher called
in-process (``torch.distributed.run.main``/``run``,
``torch.distributed.launcher.api.elastic_launch``, ``runpy.run_module("torch.distributed.run")``). Docstrings,
help texts
and printed or logged strings are no sign.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ddpstudio.core.scriptgate import dotted

LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")
LAUNCHER_COMMAND = "torchrun"
# Calls that start a process, by module; a script may import the function by its name.
PROCESS_STARTERS = {
    "subprocess": ("run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"),
    "os": ("system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe",
           "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "posix_spawn", "posix_spawnp"),
    "asyncio": ("create_subprocess_exec", "create_subprocess_shell"),
}
# torch's launcher as a function: torchrun's main(), its run(config), and the elastic agent's launch.
IN_PROCESS = {"torch.distributed.run": ("main", "run"),
              "torch.distributed.launcher.api": ("elastic_launch", "launch_agent"),
              "torch.distributed.launcher": ("elastic_launch", "launch_agent")}
# Where a string is words for a person, not a command: argparse's texts, printing and logging.
_TEXT_KEYWORDS = ("help", "description", "epilog", "usage", "msg", "message")
_TEXT_CALLS = ("print", "debug", "info", "warning", "warn", "error", "exception", "critical", "log", "write",
               "echo", "secho", "add_argument", "ArgumentParser", "format")


@dataclass(frozen=True)
class LauncherRun:
    """What the script runs (``torchrun``, ``torch.distributed.run``, ``elastic_launch()``) and on which line."""

    name: str
    line: int


def runs_launcher(tree: ast.Module | None) -> LauncherRun | None:
    """The first place (in line order) where the script runs a distributed launcher itself, or None."""
    if tree is None:
        return None
    called = _called(tree)  # every call, imports resolved: read once for both looks
    found = _in_process(called)
    if _starts_processes(called):
        found += _launcher_strings(tree)
    return min(found, key=lambda f: f.line) if found else None


def _imported(tree: ast.Module) -> tuple[dict[str, str], dict[str, str]]:
    """Local names of modules (``sp`` -> ``subprocess``) and of functions (``run`` -> ``subprocess.run``)."""
    modules: dict[str, str] = {}
    functions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    modules[a.asname] = a.name
                else:
                    modules[a.name.split(".")[0]] = a.name.split(".")[0]
                    modules[a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                functions[a.asname or a.name] = f"{node.module}.{a.name}"
    return modules, functions


def _called(tree: ast.Module) -> list[tuple[str, ast.Call]]:
    """Every call's full dotted name, imports resolved (``sp.run`` -> ``subprocess.run``)."""
    modules, functions = _imported(tree)
    out = []
    for node in ast.walk(tree):
        name = dotted(node.func) if isinstance(node, ast.Call) else None
        if name is None:
            continue
        head, _, rest = name.partition(".")
        if rest and head in modules:
            name = f"{modules[head]}.{rest}"
        elif not rest and head in functions:
            name = functions[head]
        elif not rest and head in modules:
            name = modules[head]
        out.append((name, node))
    return out


def _starts_processes(called: list[tuple[str, ast.Call]]) -> bool:
    for name, _ in called:
        module, _, function = name.rpartition(".")
        if function in PROCESS_STARTERS.get(module, ()):
            return True
    return False


def _in_process(called: list[tuple[str, ast.Call]]) -> list[LauncherRun]:
    out = []
    for name, node in called:
        module, _, function = name.rpartition(".")
        if function in IN_PROCESS.get(module, ()):
            out.append(LauncherRun(f"{module}.{function}()", node.lineno))
        elif name == "runpy.run_module" and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value in LAUNCHER_MODULES:  # torchrun's __main__, run in this process
            out.append(LauncherRun(node.args[0].value, node.lineno))
    return out


def _launcher_strings(tree: ast.Module) -> list[LauncherRun]:
    """Strings of the code that name a launcher as a command or a command's item (``["accelerate", "launch",
    ...]`` counts as one command)."""
    words = _words_for_people(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in words:
            name = _launcher_named(node.value)
            if name is not None:
                out.append(LauncherRun(name, node.lineno))
        elif isinstance(node, (ast.List, ast.Tuple)):
            items = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in node.elts]
            if any(a == "accelerate" and b == "launch" for a, b in zip(items, items[1:])):
                out.append(LauncherRun("accelerate launch", node.lineno))
    return out


def _launcher_named(text: str) -> str | None:
    """``torchrun``/``torch.distributed.run`` as a command list's item, or a command line that runs one."""
    text = text.strip()
    if text in LAUNCHER_MODULES or text == LAUNCHER_COMMAND:
        return text
    tokens = text.split()
    for i, token in enumerate(tokens):
        if token == "-m" and i + 1 < len(tokens) and tokens[i + 1] in LAUNCHER_MODULES:
            return tokens[i + 1]
    command = tokens[0].replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".exe") if tokens else ""
    if command == LAUNCHER_COMMAND and len(tokens) > 1:
        return LAUNCHER_COMMAND
    if command == "accelerate" and tokens[1:2] == ["launch"]:
        return "accelerate launch"
    return None


def _words_for_people(tree: ast.Module) -> set[int]:
    """The ids of string nodes that are docstrings, help texts, or printed and logged words."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))  # a docstring, or a string statement
        elif isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            inside = [*node.args] if name.rpartition(".")[2] in _TEXT_CALLS else []
            inside += [k.value for k in node.keywords if k.arg in _TEXT_KEYWORDS]
            for part in inside:
                skip.update(id(n) for n in ast.walk(part) if isinstance(n, ast.Constant))
    return skip
