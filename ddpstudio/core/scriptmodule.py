"""A script that works only inside its package runs as ``python -m package.module``, as ``torchrun -m`` runs it.

Run as a file (``python mypkg/train.py``), Python puts the script's own folder
first on ``sys.path`` and gives the script no package, so two ways of writing
a package's entry point stop at their first line:

- a relative import, ``from .model import Net``: "ImportError: attempted
  relative import with no known parent package" (CPython,
  Lib/importlib/_bootstrap.py ``_sanity_check`` via ``_calc___package__``);
- an import of its own package, ``from mypkg.model import Net``, where
  ``mypkg`` is not installed: "ModuleNotFoundError: No module named 'mypkg'",
  since the folder above the package is not on the path. (Installed, it
  runs as a file, as before: :func:`installed`.)

Such a script runs as ``python -m mypkg.train`` with the folder above its top
package first on the ranks' PYTHONPATH (as ``cd proj && torchrun -m
mypkg.train``, which puts the working folder first). Its ``__file__``,
``sys.argv[0]`` and working folder stay what they were; ``__package__`` is
set. A script that needs neither runs as a file, as before. Nothing is run:
the imports are read from the AST.
"""

from __future__ import annotations

import ast
import keyword
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path

from ddpstudio.core.scriptargs import parse_script
from ddpstudio.core.scriptstyle import read_source


@dataclass(frozen=True)
class ModuleEntry:
    """How a script runs as a module: its dotted name, the folder it is found from, and why."""

    name: str  # mypkg.train; a package's __main__.py is run by the package's name
    root: str  # the folder above the top package: first on the ranks' PYTHONPATH
    why: str


def module_root(path: str, name: str) -> str:
    """The folder ``python -m name`` finds ``path`` from: one level up per package in ``name``."""
    packages = name.count(".") + (1 if Path(path).stem == "__main__" else 0)
    return str(Path(path).resolve().parents[packages])


def default_working_folder(path: str) -> str:
    """Where the window runs a script whose Working folder is left empty: the folder ``python -m`` runs a
    package's module from (:func:`module_entry`), else the script's own folder, where a double-click in
    Explorer runs it. Never the window's own working folder: started from the Start menu, that is the
    install folder (the shortcut's "Start in")."""
    entry = module_entry(path, parse_script(read_source(path)))
    return entry.root if entry is not None else str(Path(path).expanduser().resolve().parent)


def module_file(name: str, folder: str) -> str:
    """The file ``python -m name`` runs, found from ``folder`` (the working folder, first on its path);
    raises ValueError saying what to do when there is none there."""
    parts = name.split(".")
    if not all(_is_name(part) for part in parts):
        raise ValueError(f"--module {name!r} is not a module name: give dotted Python names, as python -m "
                         "takes them (mypkg.train)")
    base = Path(folder).joinpath(*parts)
    for found in (base.with_suffix(".py"), base / "__main__.py"):
        if found.is_file():
            return str(found)
    raise ValueError(f"--module {name}: there is no {Path(*parts)}.py or {Path(*parts, '__main__.py')} in "
                     f"{folder}, the working folder, where python -m looks first: run from the folder above "
                     "your package, or give the file with --script")


def installed(name: str) -> bool:
    """Whether this Python finds top-level package ``name`` without the working folder, which a script run
    as a file does not have on its path: installed, editable (a meta path finder of its own) or on
    PYTHONPATH. The ranks run this Python (the plan's interpreter is the launcher's)."""
    here = os.path.normcase(os.getcwd())  # Windows: c:\ and C:\ are one folder
    path = [entry for entry in sys.path if entry and os.path.normcase(os.path.abspath(entry)) != here]
    for finder in sys.meta_path:
        try:
            found = finder.find_spec(name, path) if finder is PathFinder else finder.find_spec(name, None)
        except (ImportError, ValueError, TypeError):  # a third-party finder's trouble is not an answer
            continue
        if found is not None:
            return True
    return False


def module_entry(path: str, tree: ast.AST | None,
                 importable: Callable[[str], bool] = installed) -> ModuleEntry | None:
    """The module a script must run as, when it imports relatively, or imports its own package and that
    package is not ``importable`` otherwise (an installed one keeps it a file, as it ran before); None when
    it runs as a file, or cannot be named as a module (a folder named ``my-project``: the plan says nothing,
    and a failure's hint says what to rename)."""
    if tree is None:
        return None
    script = Path(path).resolve()
    package = _package_folders(script.parent)  # the folders holding __init__.py, outermost first
    relative = _relative_imports(tree)
    own = _own_package_import(tree, package[0].name) if package and not relative else None
    if own is not None and importable(package[0].name):
        own = None
    if not relative and own is None:
        return None
    depth = max(len(package), max(level for level, _, _ in relative) if relative else 0)
    folders = [script.parent, *script.parent.parents][:depth][::-1]
    if len(folders) < depth or not all(_is_name(f.name) for f in folders):
        return None
    parts = [f.name for f in folders] + ([] if script.stem == "__main__" else [script.stem])
    if not _is_name(script.stem) or not parts:
        return None
    name, root = ".".join(parts), str(folders[0].parent)
    if relative:
        _, line, text = relative[0]
        said = f"imports relatively ({text}, line {line}), which works only inside its package {folders[-1].name}"
    else:
        line, text = own
        said = (f"imports its own package ({text}, line {line}), which Python finds only from the folder above "
                f"{folders[0].name}")
    return ModuleEntry(name, root, f"the script {said}: it runs as python -m {name}, found from {root} "
                                   "(as torchrun -m runs it from there)")


def _package_folders(folder: Path) -> list[Path]:
    found = []
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        found.append(folder)
        folder = folder.parent
    return found[::-1]


def _relative_imports(tree: ast.AST) -> list[tuple[int, int, str]]:
    """(level, line, the statement) of every ``from .x import y``, in line order."""
    found = [(node.level, node.lineno, _said(node)) for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and node.level]
    return sorted(found, key=lambda item: item[1])


def _own_package_import(tree: ast.AST, top: str) -> tuple[int, str] | None:
    """(line, the statement) of the first absolute import of package ``top`` or a module in it."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(n == top or n.startswith(top + ".") for n in names):
            hits.append((node.lineno, _said(node)))
    return min(hits) if hits else None


def _said(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_name(part: str) -> bool:
    return part.isidentifier() and not keyword.iskeyword(part)
