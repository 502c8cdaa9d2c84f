"""Every test that needs POSIX-only things is marked ``posix_only``, so the Windows workflow can pass.

Read from the tests' source (ast): a test that names ``signal.SIGKILL``,
``os.killpg``, ``os.fork``, ``os.geteuid``, ``preexec_fn``, a ``/proc/`` path,
or ``signal.SIGINT`` (sent to a child: Windows' ``send_signal`` takes only
SIGTERM, CTRL_C_EVENT and CTRL_BREAK_EVENT; a child's exit by SIGINT is
STATUS_CONTROL_C_EXIT there), directly or through a helper of its module, needs ``@pytest.mark.posix_only("why")`` on itself or its module
(or a ``skipif`` on win32). A parametrized case may carry the mark alone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
POSIX_NAMES = {("signal", n) for n in ("SIGKILL", "SIGUSR1", "SIGUSR2", "SIGSTOP", "SIGCONT", "SIGHUP", "SIGQUIT",
                                      "SIGALRM", "SIGCHLD", "SIGPIPE", "SIGINT")} | \
              {("os", n) for n in ("killpg", "fork", "setsid", "getpgid", "setpgrp", "getpgrp", "getuid", "geteuid")}
POSIX_TEXT = re.compile(r"(?<![\w/])/proc/|preexec_fn|os\.killpg|signal\.SIGKILL")


def _uses(node: ast.AST) -> set[str]:
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (n.value.id, n.attr) in POSIX_NAMES:
            found.add(f"{n.value.id}.{n.attr}")
        elif isinstance(n, ast.keyword) and n.arg == "preexec_fn":
            found.add("preexec_fn")
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and POSIX_TEXT.search(n.value):
            found.add(POSIX_TEXT.search(n.value).group())
    return found


def _marked(nodes: list[ast.expr]) -> bool:
    text = " ".join(ast.unparse(n) for n in nodes)
    return "posix_only" in text or ("skipif" in text and "win32" in text)


def unmarked(source: str) -> dict[str, set[str]]:
    """Test name -> the POSIX-only things it uses without a posix_only mark."""
    tree = ast.parse(source)
    module_marks = [n.value for n in tree.body if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)]
    if _marked(module_marks):
        return {}
    helpers: dict[str, set[str]] = {}
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.name.startswith("test_"):
            helpers[n.name] = set() if _marked(n.decorator_list) else _uses(n)
        elif isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
            helpers[n.targets[0].id] = _uses(n.value)
    found = {}
    for n in tree.body:
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or not n.name.startswith("test_"):
            continue
        if _marked(n.decorator_list):
            continue
        uses = _uses(n)
        named = {a.arg for a in n.args.args} | {x.id for x in ast.walk(n) if isinstance(x, ast.Name)}
        for helper in named & helpers.keys():
            uses |= {f"{helper}: {u}" for u in helpers[helper]}
        if uses:
            found[n.name] = uses
    return found


def test_tests_that_need_posix_are_marked_posix_only():
    missing = {f"{path.name}::{name}": sorted(uses) for path in sorted(TESTS.glob("test_*.py"))
               if path.name != Path(__file__).name  # its own example below
               for name, uses in unmarked(path.read_text(encoding="utf-8")).items()}
    assert missing == {}, "mark these @pytest.mark.posix_only(\"why\") or make them Windows-safe:\n" + "\n".join(
        f"  {k}: {v}" for k, v in missing.items())


def test_the_check_finds_a_sigkill_through_a_helper_and_accepts_marks():
    source = '''
import os, signal, pytest
def _kill(pid):
    os.kill(pid, signal.SIGKILL)
def test_plain(): _kill(1)
@pytest.mark.posix_only("why")
def test_marked(): _kill(1)
def test_proc_path(): open("/proc/x/y")
def test_module_path_is_fine(): open("core/process/restartmgr.py")
'''
    assert unmarked(source) == {"test_plain": {"_kill: signal.SIGKILL"}, "test_proc_path": {"/proc/"}}
    assert unmarked('import pytest\npytestmark = pytest.mark.posix_only("all")\n' + source) == {}
