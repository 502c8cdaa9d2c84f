"""Does a function the script imports from its own project start the ranks? Read from the files, never run.

detectron2's tools call ``launch(main, args.num_gpus, ...)``, imported from the project's ``engine`` package,
whose ``launch.py`` calls ``torch.multiprocessing.start_processes``; many projects keep such a launcher in their
own ``utils/dist.py``. Nothing in the script's own file starts processes, so it looked like a one-process-per-
rank script: args style, each copy spawning ranks of its own (helper trial, 2026-12-07: "unrecognized
arguments: --dist-backend", and with env style two groups fighting over one port).

Followed: ``from pkg.mod import name`` and ``from .mod import name`` where ``name`` is called in the script and
the module is a file of the project (under the script's folder, or one or two folders above it: detectron2's
``tools/train_net.py`` beside its ``detectron2/`` package), including a package ``__init__`` that re-exports
``name`` from a submodule. The module counts when it calls a spawn function (core/scriptstyle.py) or runs a
launcher (core/ownlauncher.py). Installed packages are not read (their launchers: core/liblaunch.py).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core.scriptargs import parse_script

MAX_FILES = 12  # files read at most for one script
PARENTS = 2  # folders above the script's where its project's top package may be


@dataclass(frozen=True)
class LocalSpawn:
    """The call in the script, and where in the project the processes are started."""

    name: str
    line: int
    where: str  # the module's file, relative to the script's folder
    what: str  # the spawn call or launcher found there
    what_line: int

    def why(self) -> str:
        return (f"the script calls {self.name}() (line {self.line}), which starts processes itself ({self.what} "
                f"in {self.where}, line {self.what_line}): it starts its own ranks")


def local_spawn(tree: ast.Module | None, script_path: str | None,
                starts: Callable[[Path], tuple[str, int] | None]) -> LocalSpawn | None:
    """The first called function imported from the script's own project that starts processes, or None.
    ``starts``: what in a file starts processes (its first spawn call or launcher run, and its line), or None:
    core/scriptstyle.py's reading, handed in."""
    if tree is None or not script_path:
        return None
    folder = Path(script_path).expanduser().resolve().parent
    called: dict[str, int] = {}  # a plain name's first call line
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called[node.func.id] = min(node.lineno, called.get(node.func.id, node.lineno))
    read = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            local = alias.asname or alias.name
            if local not in called:
                continue
            for path in _files(folder, node.module, node.level, alias.name):
                read += 1
                if read > MAX_FILES:
                    return None
                found = starts(path)
                if found is not None:
                    return LocalSpawn(local, called[local], _relative(path, folder), found[0], found[1])
    return None


def _files(folder: Path, module: str | None, level: int, name: str) -> list[Path]:
    """The project files that may define ``name`` of ``module``: the module, its package, a submodule of that name,
    and the submodule its ``__init__`` re-exports the name from."""
    parts = (module or "").split(".") if module else []
    roots = [folder.parents[level - 2] if level > 1 else folder] if level else \
        [folder, *list(folder.parents)[:PARENTS]]
    out: list[Path] = []
    for root in roots:
        base = root.joinpath(*parts)
        package = base / "__init__.py"
        for path in (base.with_suffix(".py") if parts else None, package, base / f"{name}.py"):
            if path is not None and path.is_file() and path not in out:
                out.append(path)
        if package.is_file():
            out += [p for p in _reexported(package, name) if p not in out]
    return out


def _reexported(package: Path, name: str) -> list[Path]:
    """``from .launch import launch`` in a package's ``__init__``: the submodule's file."""
    tree = _parse(package)
    if tree is None:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module \
                and any((a.asname or a.name) == name for a in node.names):
            path = package.parent.joinpath(*node.module.split(".")).with_suffix(".py")
            if path.is_file():
                out.append(path)
    return out


def _parse(path: Path) -> ast.Module | None:
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return parse_script(source)


def _relative(path: Path, folder: Path) -> str:
    try:
        return path.relative_to(folder).as_posix()
    except ValueError:
        try:
            return path.relative_to(folder.parent).as_posix()
        except ValueError:
            return path.as_posix()
