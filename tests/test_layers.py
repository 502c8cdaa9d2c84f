"""The layers stay apart: only ddpstudio/gui imports Qt; core imports no front end and has no cycle;
rank-side code stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ddpstudio"
QT = ("PySide6", "pyqtgraph", "shiboken6", "PyQt5", "PyQt6")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function, relative imports resolved.

    ``from package import name`` counts as importing ``package.name`` too when that is a module.
    """
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names
                         if module.startswith("ddpstudio") and is_module(f"{module}.{alias.name}"))
    return names


def is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def python_files_outside_gui() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "gui" not in p.relative_to(PACKAGE).parts]


def test_only_the_gui_imports_qt():
    offenders = {str(p.relative_to(PACKAGE)): sorted(m for m in imported_modules(p) if m.split(".")[0] in QT)
                 for p in python_files_outside_gui()}
    assert not {k: v for k, v in offenders.items() if v}


def test_core_never_imports_rank_cli_or_gui():
    offenders = {}
    for path in (PACKAGE / "core").rglob("*.py"):
        bad = sorted(m for m in imported_modules(path)
                     if m.startswith(("ddpstudio.rank", "ddpstudio.cli", "ddpstudio.gui")))
        if bad:
            offenders[str(path.relative_to(PACKAGE))] = bad
    assert not offenders, f"core must not import the rank side or a front end: {offenders}"


def core_import_graph() -> dict[str, set[str]]:
    """Module -> the core modules it imports (package ``__init__`` re-exports excluded as edges)."""
    files = {module_name(p): p for p in (PACKAGE / "core").rglob("*.py") if p.name != "__init__.py"}
    return {name: {m for m in imported_modules(path) if m in files and m != name} for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_core_has_no_import_cycle():
    cycle = find_cycle(core_import_graph())
    assert cycle is None, "import cycle inside core: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_rank_side_code_never_imports_the_gui_or_the_cli():
    for path in (PACKAGE / "rank").rglob("*.py"):
        bad = [m for m in imported_modules(path) if m.startswith(("ddpstudio.gui", "ddpstudio.cli"))]
        assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("module, forbidden", [
    ("ddpstudio.report", ("torch", "PySide6", "psutil")),
    ("ddpstudio.rank.emit", ("torch", "PySide6")),
    ("ddpstudio.core.launch.launcher", ("torch", "PySide6", "pyqtgraph")),
    ("ddpstudio.rank.recipe", ("PySide6", "pyqtgraph", "ddpstudio.gui", "ddpstudio.cli")),
])
def test_imports_stay_light(module, forbidden):
    code = (f"import sys, {module}; "
            f"print(','.join(m for m in {forbidden!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing {module} loaded {out}"
