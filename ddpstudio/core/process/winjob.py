"""A Windows Job Object with KILL_ON_JOB_CLOSE, through ctypes (Windows only).

When the last handle to the job closes (the launcher exits or is killed),
Windows kills every process in it: no orphaned ranks keep a FileStore locked.
Every Win32 function gets its argtypes and restype: without them ctypes passes
a 64-bit handle as a 32-bit int and returns BOOL/HANDLE as int.
"""

from __future__ import annotations

import ctypes

# Fixed-width Windows types, so the layout (and its test) is the same on every host;
# ctypes.DWORD is 8 bytes on 64-bit Linux.
DWORD = ctypes.c_uint32
HANDLE = ctypes.c_void_p

JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9


class _IoCounters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
        "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]


class _BasicLimits(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", DWORD),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", DWORD),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", DWORD),
        ("SchedulingClass", DWORD),
    ]


class _ExtendedLimits(ctypes.Structure):
    _fields_ = [
        ("BasicLimitInformation", _BasicLimits),
        ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


BOOL = ctypes.c_int


def kernel32():
    """kernel32 with every function this module calls declared."""
    k32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    declare(k32)
    return k32


def declare(k32) -> None:
    k32.CreateJobObjectW.argtypes = [ctypes.c_void_p, ctypes.c_wchar_p]
    k32.CreateJobObjectW.restype = HANDLE
    k32.SetInformationJobObject.argtypes = [HANDLE, ctypes.c_int, ctypes.c_void_p, DWORD]
    k32.SetInformationJobObject.restype = BOOL
    k32.AssignProcessToJobObject.argtypes = [HANDLE, HANDLE]
    k32.AssignProcessToJobObject.restype = BOOL
    k32.TerminateJobObject.argtypes = [HANDLE, ctypes.c_uint]
    k32.TerminateJobObject.restype = BOOL
    k32.CloseHandle.argtypes = [HANDLE]
    k32.CloseHandle.restype = BOOL
    k32.GetCurrentProcess.argtypes = []
    k32.GetCurrentProcess.restype = HANDLE


class JobObject:
    """One job; ``kernel32`` is the seam for tests (default: the real one, declared)."""

    def __init__(self, k32=None) -> None:
        self._k32 = k32 if k32 is not None else kernel32()
        self.handle = self._k32.CreateJobObjectW(None, None)
        if not self.handle:
            raise ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined]
        info = _ExtendedLimits()
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        if not self._k32.SetInformationJobObject(
                self.handle, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS, ctypes.byref(info), ctypes.sizeof(info)):
            raise ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined]

    def assign(self, process_handle: int) -> None:
        if not self._k32.AssignProcessToJobObject(self.handle, HANDLE(int(process_handle))):
            raise ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined]

    def assign_current_process(self) -> None:
        """Put this process in the job: everything it starts from now on is born inside it."""
        if not self._k32.AssignProcessToJobObject(self.handle, self._k32.GetCurrentProcess()):
            raise ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined]

    def terminate(self, exit_code: int = 1) -> None:
        if self.handle:
            self._k32.TerminateJobObject(self.handle, exit_code)

    def close(self) -> None:
        if self.handle:
            self._k32.CloseHandle(self.handle)
            self.handle = None
