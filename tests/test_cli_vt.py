"""The progress line on Windows 10's console: escape codes switched on, or plain lines (through the platform seam)."""

from __future__ import annotations

import ctypes
import io
import sys
from ctypes import wintypes

import pytest

from ddpstudio.cli import vt
from ddpstudio.cli.progress import ProgressView
from ddpstudio.core import protocol
from ddpstudio.core.platform import LINUX, WINDOWS


class Console:
    """kernel32's console calls as a Windows console answers them (the hardware edge)."""

    def __init__(self, mode: int | None = 0x0003, can_set: bool = True) -> None:
        self.mode, self.can_set, self.set_calls = mode, can_set, []

    def GetStdHandle(self, which):  # noqa: N802 - kernel32's names
        assert which == 0xFFFFFFF5  # STD_OUTPUT_HANDLE as a DWORD
        return 7

    def GetConsoleMode(self, handle, pointer):  # noqa: N802
        if self.mode is None:
            return 0  # output redirected: not a console
        pointer.contents.value = self.mode
        return 1

    def SetConsoleMode(self, handle, mode):  # noqa: N802
        self.set_calls.append(mode)
        return 1 if self.can_set else 0


def steps(view: ProgressView) -> None:
    view.feed(protocol.make_event(protocol.RUN_STARTED, run_id="r1", world_size=2, backend="gloo", device="cpu",
                                  store="file", run_dir="/tmp/r1", max_steps=10, reasons=[]))
    for step in range(1, 11):
        view.feed(protocol.make_event(protocol.GLOBAL_STEP, step=step, loss=1.0 / step, samples_per_s=100.0, total_steps=10))


def test_windows_console_gets_virtual_terminal_processing():
    console = Console(mode=0x0003)
    assert vt.enable_virtual_terminal(WINDOWS, console)
    assert console.set_calls == [0x0003 | vt.ENABLE_VIRTUAL_TERMINAL_PROCESSING]
    out = io.StringIO()
    steps(ProgressView(out=out, tty=True, platform=WINDOWS, kernel32=Console()))
    assert "\r\033[K" in out.getvalue()  # the live line, now interpreted by the console


def test_console_already_in_vt_mode_is_left_alone():
    console = Console(mode=0x0007)
    assert vt.enable_virtual_terminal(WINDOWS, console) and console.set_calls == []


def test_console_without_vt_falls_back_to_plain_lines():
    """An older console refuses the mode: no escape codes at all, one line every few steps."""
    out = io.StringIO()
    view = ProgressView(out=out, tty=True, platform=WINDOWS, kernel32=Console(can_set=False), every=5)
    assert not view.tty
    steps(view)
    text = out.getvalue()
    assert "\033" not in text and "\r" not in text
    assert [line.split()[:2] for line in text.splitlines() if line.startswith("step")] == [["step", "1"], ["step", "5"], ["step", "10"]]


def test_redirected_output_falls_back():
    assert not vt.enable_virtual_terminal(WINDOWS, Console(mode=None))


@pytest.mark.skipif(sys.platform == "win32", reason="the real kernel32 exists there")
def test_no_kernel32_falls_back():
    assert vt._kernel32() is None and not vt.enable_virtual_terminal(WINDOWS)


def test_off_windows_nothing_is_asked():
    console = Console()
    assert vt.enable_virtual_terminal(LINUX, console) and console.set_calls == []


def test_kernel32_calls_declare_their_types():
    class Lib:
        GetStdHandle = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)
        GetConsoleMode = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)
        SetConsoleMode = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)

    lib = vt.declare(Lib())
    assert lib.GetStdHandle.restype is wintypes.HANDLE and lib.GetStdHandle.argtypes == [wintypes.DWORD]
    assert lib.GetConsoleMode.argtypes[0] is wintypes.HANDLE and lib.GetConsoleMode.restype is wintypes.BOOL
    assert lib.SetConsoleMode.argtypes == [wintypes.HANDLE, wintypes.DWORD]
