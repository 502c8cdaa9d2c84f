"""The layers stay apart: only ddpstudio/gui imports Qt; rank-side code stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ddpstudio"
QT = ("PySide6", "pyqtgraph", "shiboken6", "PyQt5", "PyQt6")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def python_files_outside_gui() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "gui" not in p.relative_to(PACKAGE).parts]


def test_only_the_gui_imports_qt():
    offenders = {str(p.relative_to(PACKAGE)): sorted(m for m in imported_modules(p) if m.split(".")[0] in QT)
                 for p in python_files_outside_gui()}
    assert not {k: v for k, v in offenders.items() if v}


def test_rank_side_code_never_imports_the_gui_or_the_cli():
    for path in (PACKAGE / "rank").rglob("*.py"):
        bad = [m for m in imported_modules(path) if m.startswith(("ddpstudio.gui", "ddpstudio.cli"))]
        assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("module, forbidden", [
    ("ddpstudio.report", ("torch", "PySide6", "psutil")),
    ("ddpstudio.rank.emit", ("torch", "PySide6")),
    ("ddpstudio.core.launcher", ("torch", "PySide6", "pyqtgraph")),
    ("ddpstudio.rank.recipe", ("PySide6", "pyqtgraph", "ddpstudio.gui", "ddpstudio.cli")),
])
def test_imports_stay_light(module, forbidden):
    code = (f"import sys, {module}; "
            f"print(','.join(m for m in {forbidden!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing {module} loaded {out}"
