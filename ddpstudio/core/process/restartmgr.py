"""Which processes hold a file open, asked of Windows' Restart Manager (RmGetList).

psutil's ``open_files`` only sees handles that are open at the instant it
looks, and torch's FileStore opens its file per operation, so it finds a
holder by chance. The Restart Manager is what Explorer uses to name the
program in "the file is open in ...": it also covers handles of processes
psutil may not inspect. Windows only; structures as in RestartManager.h.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Iterable

CCH_RM_SESSION_KEY = 32  # a GUID as 32 hex characters
CCH_RM_MAX_APP_NAME = 255
CCH_RM_MAX_SVC_NAME = 63
ERROR_SUCCESS = 0
ERROR_MORE_DATA = 234
_EPOCH_AS_FILETIME = 116444736000000000  # 1970-01-01 in 100 ns ticks since 1601-01-01

# WCHAR is 2 bytes on Windows; ctypes' c_wchar is 4 on Linux, where only the layout is tested.
WCHAR = ctypes.c_wchar if ctypes.sizeof(ctypes.c_wchar) == 2 else ctypes.c_uint16
DWORD, UINT, BOOL = ctypes.c_uint32, ctypes.c_uint, ctypes.c_int


class FILETIME(ctypes.Structure):
    _fields_ = [("dwLowDateTime", DWORD), ("dwHighDateTime", DWORD)]


class RM_UNIQUE_PROCESS(ctypes.Structure):
    _fields_ = [("dwProcessId", DWORD), ("ProcessStartTime", FILETIME)]


class RM_PROCESS_INFO(ctypes.Structure):
    _fields_ = [
        ("Process", RM_UNIQUE_PROCESS),
        ("strAppName", WCHAR * (CCH_RM_MAX_APP_NAME + 1)),
        ("strServiceShortName", WCHAR * (CCH_RM_MAX_SVC_NAME + 1)),
        ("ApplicationType", ctypes.c_int),
        ("AppStatus", ctypes.c_ulong if ctypes.sizeof(ctypes.c_ulong) == 4 else ctypes.c_uint32),
        ("TSSessionId", DWORD),
        ("bRestartable", BOOL),
    ]


@dataclass(frozen=True)
class Holder:
    """A process with the file open: its pid, start time (epoch seconds, for the identity test) and name."""

    pid: int
    create_time: float
    name: str


def filetime_to_epoch(ft: FILETIME) -> float:
    ticks = (ft.dwHighDateTime << 32) | ft.dwLowDateTime
    return (ticks - _EPOCH_AS_FILETIME) / 1e7


def _app_name(info: RM_PROCESS_INFO) -> str:
    raw = info.strAppName
    return raw if isinstance(raw, str) else "".join(map(chr, raw)).split("\0", 1)[0]


def _api():
    """rstrtmgr.dll with every function declared, or None where there is none (not Windows)."""
    from ctypes import wintypes

    try:
        rm = ctypes.WinDLL("rstrtmgr", use_last_error=True)
    except (AttributeError, OSError):  # no WinDLL off Windows
        return None
    rm.RmStartSession.argtypes = [ctypes.POINTER(DWORD), DWORD, wintypes.LPWSTR]
    rm.RmStartSession.restype = DWORD
    rm.RmRegisterResources.argtypes = [DWORD, UINT, ctypes.POINTER(wintypes.LPCWSTR), UINT,
                                       ctypes.POINTER(RM_UNIQUE_PROCESS), UINT, ctypes.POINTER(wintypes.LPCWSTR)]
    rm.RmRegisterResources.restype = DWORD
    rm.RmGetList.argtypes = [DWORD, ctypes.POINTER(UINT), ctypes.POINTER(UINT), ctypes.POINTER(RM_PROCESS_INFO),
                             ctypes.POINTER(DWORD)]
    rm.RmGetList.restype = DWORD
    rm.RmEndSession.argtypes = [DWORD]
    rm.RmEndSession.restype = DWORD
    return rm


def holders_of(path: str) -> list[Holder]:
    """The processes that hold ``path`` open now; [] when none, or when the Restart Manager fails or is missing."""
    from ctypes import wintypes

    rm = _api()
    if rm is None:
        return []
    session, key = DWORD(0), ctypes.create_unicode_buffer(CCH_RM_SESSION_KEY + 1)
    if rm.RmStartSession(ctypes.byref(session), 0, key) != ERROR_SUCCESS:
        return []
    try:
        files = (wintypes.LPCWSTR * 1)(path)
        if rm.RmRegisterResources(session, 1, files, 0, None, 0, None) != ERROR_SUCCESS:
            return []
        needed, count, reasons = UINT(0), UINT(0), DWORD(0)
        infos = (RM_PROCESS_INFO * 0)()
        for _ in range(3):  # the list can grow between the two calls
            status = rm.RmGetList(session, ctypes.byref(needed), ctypes.byref(count), infos, ctypes.byref(reasons))
            if status == ERROR_SUCCESS:
                return [Holder(int(i.Process.dwProcessId), filetime_to_epoch(i.Process.ProcessStartTime),
                               _app_name(i)) for i in infos[:count.value]]
            if status != ERROR_MORE_DATA:
                return []
            infos = (RM_PROCESS_INFO * needed.value)()
            count = UINT(needed.value)
        return []
    finally:
        rm.RmEndSession(session)


def holders(paths: Iterable[str]) -> list[tuple[int, str]]:
    """``(pid, path)`` for each process holding one of ``paths`` open (the ``lockholders`` shape)."""
    return [(h.pid, p) for p in paths for h in holders_of(p)]
