"""Counts the checks in the test suite: `assert` statements and `pytest.raises`/`qtbot.wait*` calls.

Issue 21 speeds the suite up without testing less; run this before and after a change that merges or
trims tests and compare the totals: ``python scripts/count_asserts.py [tests]``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

CHECK_CALLS = {"raises", "warns", "waitSignal", "waitSignals", "waitUntil", "assertNotEmitted", "fail"}


def count(path: Path) -> tuple[int, int, int]:
    """(tests, assert statements, checking calls) in one test module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    tests = asserts = calls = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
            tests += 1
        elif isinstance(node, ast.Assert):
            asserts += 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CHECK_CALLS:
            calls += 1
    return tests, asserts, calls


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "tests"
    totals = [0, 0, 0]
    for path in sorted(root.rglob("*.py")):
        for i, n in enumerate(count(path)):
            totals[i] += n
    print(f"{totals[0]} test functions, {totals[1]} assert statements, {totals[2]} raises/wait/fail calls "
          f"({totals[1] + totals[2]} checks) under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
