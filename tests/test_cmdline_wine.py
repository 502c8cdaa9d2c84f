"""core/cmdline.py against Windows' own command-line parsing, run under Wine (issue 19, item 4).

tests/scripts/argv_dump.c, built with mingw-w64, reports how a line splits three ways: its C
runtime's argv (a child started by CreateProcessW with exactly that line: how python.exe reads its
arguments), CommandLineToArgvW, and the argv of a child that cmd.exe ran from a pasted line.
Wine's msvcrt follows the documented post-2008 rule for "" inside quotes, as the UCRT does;
CommandLineToArgvW does not (checked below), which is why core/cmdline.py follows the runtime.
Skips only where Wine or mingw-w64 is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ddpstudio.core import cmdline
from ddpstudio.core.platform import WINDOWS
from tests.test_cmdline import PATH, tricky_lists
from tests.wine import first_server_of

SOURCE = Path(__file__).parent / "scripts" / "argv_dump.c"
MINGW = "x86_64-w64-mingw32-gcc"


def _missing() -> str | None:
    if sys.platform != "linux":
        return "runs Windows' own parsers under Wine on Linux"
    absent = sorted({pkg for tool, pkg in {"wine": "wine64", "wineserver": "wine64", MINGW: "gcc-mingw-w64-x86-64"}.items()
                     if not shutil.which(tool)})
    return f"needs the Debian packages {', '.join(absent)}" if absent else None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_missing() is not None, reason=_missing() or "")]


class Windows:
    """argv_dump.exe in a private Wine prefix; ``ask`` sends it lines and decodes its answers."""

    def __init__(self, base: Path) -> None:
        self.exe = base / "argv_dump.exe"
        subprocess.run([MINGW, "-municode", "-O2", "-o", str(self.exe), str(SOURCE), "-lshell32"],
                       check=True, capture_output=True, timeout=120)
        home = base / "home"
        home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DDPSTUDIO", "WINE"))}
        self.env.update(WINEPREFIX=str(base / "prefix"), WINEDEBUG="-all", HOME=str(home), DISPLAY="",
                        XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"),
                        WINEDLLOVERRIDES="mscoree,mshtml,winemenubuilder.exe=d")
        first_server_of(base / "prefix", self.env)
        # Persistent, as tests/wine.py's WindowsBox: without it each program's server ends about 3 s after
        # that program, and the next program can reach it while it ends (exit 1, seen once in a census run).
        subprocess.run(["wineserver", "-p"], env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60, check=True)
        # Into a file: the services wineboot starts keep its standard handles open as long as the server lives.
        with open(base / "wineboot.log", "wb") as log:
            subprocess.run(["wine", "wineboot", "-i"], env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                           timeout=180, check=True)

    def ask(self, lines: list[str]) -> list[tuple[str, list[str]]]:
        assert all("\n" not in line and "\r" not in line for line in lines)
        done = subprocess.run(["wine", str(self.exe)], input="".join(line + "\n" for line in lines), env=self.env,
                              capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=240)
        assert done.returncode == 0, f"argv_dump.exe exited {done.returncode}: {done.stderr[-2000:]}"
        return [_decode(line) for line in done.stdout.splitlines() if line.strip()]

    def close(self) -> None:
        """Ends the prefix's wineserver, and checks that no process of the prefix is left."""
        subprocess.run(["wineserver", "-k"], env=self.env, capture_output=True, timeout=60)
        subprocess.run(["wineserver", "-w"], env=self.env, capture_output=True, timeout=60)
        deadline = time.monotonic() + 10
        while (left := self._processes()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, f"Wine processes left running: {left}"

    def _processes(self) -> list[int]:
        found = []
        for proc in psutil.process_iter():
            try:
                if proc.environ().get("WINEPREFIX") == self.env["WINEPREFIX"] and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc.pid)
            except (psutil.Error, OSError):
                continue
        return found


def _decode(line: str) -> tuple[str, list[str]]:
    tag, *parts = line.rstrip("\r").split("\t")
    assert tag in ("S", "C"), line
    return tag, ["".join(chr(int(p[i:i + 4], 16)) for i in range(0, len(p) - 1, 4)) for p in parts]


@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    w = Windows(tmp_path_factory.mktemp("wine-argv"))
    yield w
    w.close()


def test_the_splitter_reads_lines_as_the_windows_c_runtime_does(windows):
    lines = [cmdline.join(args, WINDOWS) for args in tricky_lists(count=150)]
    lines += ['a"b"" c d', '"x""y" z', r'a\\\"b "c\\"', '"open quote', r"--data C:\datasets\imagenet"]
    answers = windows.ask([f"A {line}" for line in lines])
    assert len(answers) == 2 * len(lines)
    for line, (shell32, crt) in zip(lines, zip(answers[::2], answers[1::2])):
        assert crt == ("C", cmdline.split(line, WINDOWS)), line
        if '""' not in line:  # CommandLineToArgvW agrees except for "" inside quotes
            assert shell32 == ("S", crt[1]), line
    # The one difference, seen for real: CommandLineToArgvW ends the quoted part at "".
    assert windows.ask(['A a"b"" c d'])[0] == ("S", ['ab"', "c", "d"])


def test_a_pasted_console_line_reaches_the_program_unchanged_through_cmd_exe(windows):
    """Copy as command's line, run by cmd.exe: the program gets exactly the arguments of the form.

    Not covered here: a %NAME% pair that names a defined variable. Real cmd.exe expands variables
    before it removes carets (Stack Overflow 4094699, "How does the Windows Command Interpreter
    (CMD.EXE) parse scripts?", phase 1 before phase 2), so ``^%PATH^%`` names the undefined
    ``PATH^`` and stays; Wine 8's cmd.exe removes the carets first and expands it (seen below)."""
    from ddpstudio.gui.command_line import command_line, run_arguments
    from ddpstudio.gui.form_state import SetupState

    state = SetupState(workload="script-args", script_path=r"C:\my scripts\t.py",
                       script_args=cmdline.join(["--data", PATH, "a^b", 'say "hi"', "(x)", "<in>|out", "tr\\"],
                                                WINDOWS))
    line = command_line(state, WINDOWS)
    words = line.split(" ", 1)[1]  # the program is argv_dump.exe here, not ddpstudio
    [(tag, argv)] = windows.ask([f"K {words}"])
    assert (tag, argv) == ("C", ["run", *run_arguments(state, WINDOWS)]), line
    # Without cmd.exe's escapes the same arguments do not survive: %PATH% is expanded, & ends the command.
    naive = ["--data", r"C:\my data\%PATH%", "a&b"]
    [(_, got)] = windows.ask([f"K {cmdline.join(naive, WINDOWS)}"])
    assert got[0] == "--data" and "%PATH%" not in got[1] and got[2:] == ["a"], got
    # Wine's own divergence, recorded so that a Wine that follows Windows here makes this test say so.
    [(_, got)] = windows.ask([f"K {cmdline.shell_line(naive, WINDOWS)}"])
    assert got[2:] == ["a&b"] and "%PATH%" not in got[1], got
