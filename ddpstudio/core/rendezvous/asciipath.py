"""FileStore paths that torch can open on Windows: plain ASCII.

torch's FileStore opens its file with the C runtime's narrow ``open``
(``torch/csrc/distributed/c10d/FileStore.cpp``, ``File::File``:
``::open(path.c_str(), flags | _O_BINARY, ...)`` under ``_WIN32``). Python hands
torch the path as UTF-8 and the CRT reads those bytes in the ANSI code page,
so a store under ``C:\\Users\\Jürgen\\AppData\\Local\\DDPStudio\\stores`` cannot be
opened and every default run fails. POSIX ``open`` takes the bytes as they
are, so Linux is not affected. (``torch.save``/``torch.load`` are: they hand a
non-ASCII name to Python's ``open``, torch/serialization.py
``_open_zipfile_writer_file``.)

So on Windows a store folder with non-ASCII characters is replaced by its
8.3 short name (``GetShortPathNameW``; short names can be turned off per
volume), and failing that by a per-user ASCII folder under ``%PUBLIC%``.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Callable, Mapping

from ddpstudio.core.platform import Platform

# The seam for tests: (long path) -> 8.3 short path or None. Production uses the Win32 call.
ShortName = Callable[[str], "str | None"]


@dataclass(frozen=True)
class SafePath:
    """A path torch can open, and why it differs from the one asked for ('' when it does not)."""

    path: str
    note: str = ""


def torch_can_open(path: str, platform: Platform) -> bool:
    return not platform.is_windows or path.isascii()


def short_path_name(path: str) -> str | None:
    """The 8.3 short form of an existing ``path`` (Windows), or None when the volume has none."""
    import ctypes
    from ctypes import wintypes

    get = ctypes.WinDLL("kernel32", use_last_error=True).GetShortPathNameW
    get.argtypes = [wintypes.LPCWSTR, wintypes.LPWSTR, wintypes.DWORD]
    get.restype = wintypes.DWORD
    size = get(path, None, 0)  # the size needed, including the terminating NUL
    if size == 0:
        return None
    buffer = ctypes.create_unicode_buffer(size)
    written = get(path, buffer, size)
    return buffer.value if 0 < written < size else None


def fallback_root(env: Mapping[str, str] | None = None) -> str:
    """A per-user ASCII folder for stores: ``%PUBLIC%\\DDPStudio\\stores\\<user>``.

    ``%PUBLIC%`` (``C:\\Users\\Public``) is writable by every local user and is
    ASCII on every Windows language; the user part is the ASCII user name, or
    a hash of it.
    """
    env = os.environ if env is None else env
    public = env.get("PUBLIC") or (env.get("SystemDrive", "C:") + "\\Users\\Public")
    user = env.get("USERNAME", "user")
    key = user if re.fullmatch(r"[A-Za-z0-9._-]+", user) else "u" + hashlib.sha1(user.encode()).hexdigest()[:12]
    return public.rstrip("\\") + "\\DDPStudio\\stores\\" + key


def safe_store_folder(folder: str | os.PathLike[str], platform: Platform, *, short_name: ShortName | None = None,
                      fallback: str | None = None) -> SafePath:
    """A folder for fresh store files that torch can open: ``folder``, its short name, or the fallback.

    Creates the folder (a short name exists only for an existing folder).
    """
    folder = os.fspath(folder)
    if torch_can_open(folder, platform):
        return SafePath(folder)
    os.makedirs(folder, exist_ok=True)
    short = (short_name or short_path_name)(folder)
    if short and short.isascii():
        return SafePath(short, f"store folder {folder} has non-ASCII characters, which torch's FileStore "
                               f"cannot open on Windows: using its short name {short}")
    target = fallback or fallback_root()
    os.makedirs(target, exist_ok=True)
    return SafePath(target, f"store folder {folder} has non-ASCII characters, which torch's FileStore cannot "
                            f"open on Windows, and has no short name: using {target}")


def safe_store_path(path: str, platform: Platform, *, short_name: ShortName | None = None) -> SafePath:
    """A user's fixed store file, made openable by torch; raises ``ValueError`` with the fix when it cannot be."""
    if torch_can_open(path, platform):
        return SafePath(path)
    parent, name = _split(path, platform)
    why = "torch's FileStore opens its file with the narrow C runtime open, which cannot read non-ASCII paths"
    if not name.isascii():
        raise ValueError(f"the store path {path} has non-ASCII characters in its file name; {why}. "
                         "Choose a file name of plain letters and digits, such as pg")
    short = (short_name or short_path_name)(parent) if os.path.isdir(parent) else None
    if short and short.isascii():
        joined = short.rstrip("\\/") + "\\" + name
        return SafePath(joined, f"store path {path} written as {joined} (its short name): {why}")
    raise ValueError(f"the store path {path} has non-ASCII characters and its folder has no short name; {why}. "
                     "Choose a folder of plain letters, such as D:\\pg")


def _split(path: str, platform: Platform) -> tuple[str, str]:
    import ntpath
    import posixpath

    module = ntpath if platform.is_windows else posixpath
    return module.dirname(path), module.basename(path)


def safe_temp_folder(prefix: str, platform: Platform) -> str:
    """``tempfile.mkdtemp`` in a folder torch's FileStore can open (the first-run Gloo check)."""
    import tempfile

    base = safe_store_folder(tempfile.gettempdir(), platform).path
    return tempfile.mkdtemp(prefix=prefix, dir=base)




def store_folders(store_dir: str, platform: Platform) -> list[str]:
    """Every folder our fresh store files may be in: the data folder's, and the ASCII fallback if used."""
    folders = [store_dir]
    if not torch_can_open(store_dir, platform):
        folders.append(fallback_root())
    return folders
