"""What a process's exit status means, in words: the one place an exit code becomes text.

POSIX: ``subprocess`` reports a death by signal as ``-N`` ("killed by SIGSEGV").
Windows: a native crash ends the process with an NTSTATUS code, which
``subprocess`` reports unsigned (3221225477) and other APIs signed
(-1073741819); both spellings mean ``0xC0000005``, an access violation. We
name the status instead of printing the number (pytorch #186535 is seen by
users as "exit code 3221225477"). Standard library only: the bootstrap uses it.
"""

from __future__ import annotations

import signal

from ddpstudio.core.platform import Platform

# NTSTATUS values from the Windows SDK's ntstatus.h (and MSVC's C++ exception code).
NTSTATUS_NAMES: dict[int, str] = {
    0xC0000005: "access violation",  # STATUS_ACCESS_VIOLATION
    0xC0000006: "in-page error",  # STATUS_IN_PAGE_ERROR
    0xC000001D: "illegal instruction",  # STATUS_ILLEGAL_INSTRUCTION
    0xC0000094: "integer division by zero",  # STATUS_INTEGER_DIVIDE_BY_ZERO
    0xC00000FD: "stack overflow",  # STATUS_STACK_OVERFLOW
    0xC0000135: "a DLL was not found",  # STATUS_DLL_NOT_FOUND
    0xC0000139: "a DLL entry point was not found",  # STATUS_ENTRYPOINT_NOT_FOUND
    0xC0000142: "a DLL failed to initialise",  # STATUS_DLL_INIT_FAILED
    0xC000013A: "interrupted by Ctrl+C",  # STATUS_CONTROL_C_EXIT
    0xC0000374: "heap corruption",  # STATUS_HEAP_CORRUPTION
    0xC0000409: "stack buffer overrun",  # STATUS_STACK_BUFFER_OVERRUN (also __fastfail)
    0xC0000602: "fail-fast exception",  # STATUS_FAIL_FAST_EXCEPTION
    0x80000003: "breakpoint",  # STATUS_BREAKPOINT
    0xE06D7363: "unhandled C++ exception",  # MSVC's exception code ("msc")
}
# Statuses that mean "it was stopped", not "it crashed".
_NOT_CRASHES = {0xC000013A}
# Signals that mean the process crashed in native code (not "someone stopped it").
CRASH_SIGNALS = {"SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGSYS", "SIGTRAP"}


def windows_status(code: int) -> int | None:
    """The NTSTATUS an exit code spells (either sign), or None when it is an ordinary exit code."""
    status = code & 0xFFFFFFFF
    # The top two bits are the severity: 10 warning, 11 error; ordinary exit codes are small.
    return status if status >= 0x80000000 else None


def is_native_crash(code: int | None, platform: Platform) -> bool:
    """Whether the process died inside native code (segfault, abort, access violation...)."""
    if code is None or code == 0:
        return False
    if platform.is_windows:
        status = windows_status(code)
        if status is None or status in _NOT_CRASHES:
            return False
        return status >> 30 == 3 or status in NTSTATUS_NAMES  # severity "error", or a named one
    return code < 0 and _signal_name(-code) in CRASH_SIGNALS


def describe_exit(code: int | None, platform: Platform) -> str:
    """How a process ended, in words: "exit code 1", "killed by SIGSEGV",
    "crashed: access violation (0xC0000005)"."""
    if code is None:
        return "no exit code"
    if platform.is_windows:
        status = windows_status(code)
        if status is not None:
            name = NTSTATUS_NAMES.get(status)
            if status in _NOT_CRASHES:
                return f"{name} (0x{status:08X})"
            if name is not None:
                return f"crashed: {name} (0x{status:08X})"
            return f"crashed with Windows status 0x{status:08X}"
        return f"exit code {code}"
    if code < 0:
        return f"killed by {_signal_name(-code) or f'signal {-code}'}"
    return f"exit code {code}"


def _signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None
