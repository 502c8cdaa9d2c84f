"""FileStore paths <-> ``file://`` init_method URLs, built the way torch parses them.

``file_store_url`` is the one place that writes such a URL; ``store_path_from_url``
says which file torch will open for a URL (ours or a user's). Both follow
``torch/distributed/rendezvous.py`` (torch 2.14.1):

* ``rendezvous()`` first rebuilds the URL with ``rank``/``world_size`` in the
  query (``urlparse`` -> ``urlunparse``, lines 73-101). On Python 3.10-3.12
  that round trip drops two leading slashes of a path whose netloc is empty:
  ``file:////srv/x`` comes back as ``file://srv/x`` (netloc ``srv``).
* ``_file_rendezvous_handler`` (lines 126-151) then parses it again. On POSIX
  the store path is ``urlparse(url).path`` as is: no percent-decoding, so a
  ``%20`` stays three characters. On win32 it is
  ``os.path.normpath(urllib.request.url2pathname(netloc + path))``; the
  netloc is glued on without its ``//``, which is why ``Path.as_uri()``'s UNC
  form ``file://server/share/f`` becomes the relative path ``server\\share\\f``.

So we write the documented forms (``file:///D:/pg``, ``file://////server/share/f``,
``file:///tmp/pg``) with literal spaces and non-ASCII characters, never the
two-slash ``file://D:/x`` that hung for a user (pytorch #64419).
"""

from __future__ import annotations

import ntpath
import nturl2path
import os
import posixpath
from pathlib import PureWindowsPath
from urllib.parse import urlparse, urlunparse

from ddpstudio.core.platform import Platform

__all__ = ["file_store_url", "store_path_from_url"]


def file_store_url(
    path: str | os.PathLike[str],
    platform: Platform,
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> str:
    """The ``file://`` init_method URL that makes torch open exactly ``path``.

    A relative ``path`` is taken against ``cwd`` (default: the current
    directory). Raises ``ValueError`` for a path that no URL can express.
    """
    raw = os.fspath(path)
    if platform.is_windows:
        target = _absolute_windows_path(raw, cwd)
        url = _windows_url(target)
    else:
        target = _absolute_posix_path(raw, cwd)
        url = "file://" + target
    # Check the URL against our transcription of torch's parser, so a path we
    # did not foresee fails here, with the path in the message, and not as a
    # store that silently lands somewhere else.
    try:
        parsed = store_path_from_url(url, platform)
    except ValueError:
        parsed = None
    if parsed != target:
        raise ValueError(
            f"Cannot express the store path {raw!r} as a file:// URL that torch "
            f"reads back unchanged (it would read {parsed!r}). Choose a plainer path."
        )
    return url


def store_path_from_url(url: str, platform: Platform) -> str:
    """The file torch opens for the ``file://`` init_method ``url`` on ``platform``.

    Mirrors ``rendezvous()`` + ``_file_rendezvous_handler``; understands users'
    forms too, e.g. the PyTorch-on-Windows blog's ``file:///D:\\pg`` -> ``D:\\pg``.
    """
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise ValueError(f"{url!r} is not a file:// URL; a FileStore URL starts with file:///")
    # rendezvous.py:93-97 rebuilds the URL before the handler parses it again.
    parsed = urlparse(urlunparse(parsed._replace(query="rank=0&world_size=1")))
    if platform.is_windows:
        # rendezvous.py:132-139. nturl2path.url2pathname *is*
        # urllib.request.url2pathname on Windows up to Python 3.13.
        try:
            path = nturl2path.url2pathname(parsed.netloc + parsed.path)
        except OSError as exc:  # "Bad URL", e.g. a second ':' in the path
            raise ValueError(f"torch cannot read a path from {url!r}: {exc}") from None
        if path:
            path = ntpath.normpath(path)
    else:
        path = parsed.path  # rendezvous.py:131: used as is, never unquoted
    if not path:
        raise ValueError(f"{url!r} names no file; write it as file:///absolute/path")
    return path


def _check_characters(path: str, forbidden: str, why: str) -> None:
    for ch in path:
        if ord(ch) < 32 or ch == "\x7f":
            # urlparse silently deletes tab, CR and LF from a URL.
            raise ValueError(
                f"The store path {path!r} contains a control character ({ch!r}); "
                "choose a path without one."
            )
        if ch in forbidden:
            raise ValueError(f"The store path {path!r} contains {ch!r}: {why}")


def _absolute_posix_path(raw: str, cwd: str | os.PathLike[str] | None) -> str:
    # '?' starts the query and '#' the fragment, and torch does not
    # percent-decode POSIX paths, so neither can be escaped.
    _check_characters(
        raw, "?#", "torch cannot read that character from a file:// URL on this "
        "platform; rename the folder or pick another store path.",
    )
    base = os.fspath(cwd) if cwd is not None else os.getcwd()
    full = posixpath.normpath(posixpath.join(base, raw))
    if not full.startswith("/"):
        raise ValueError(f"Cannot make {raw!r} absolute against {base!r}; pass an absolute path.")
    if full.startswith("//"):
        # "//x" is "/x" on Linux and macOS, but rendezvous()'s urlunparse turns
        # file:////x into file://x (netloc "x", empty path: "path missing").
        full = "/" + full.lstrip("/")
    if full == "/":
        raise ValueError("The store path is the root directory; it must name a file.")
    return full


def _absolute_windows_path(raw: str, cwd: str | os.PathLike[str] | None) -> str:
    raw = raw.replace("/", "\\")
    if raw.startswith("\\\\.\\"):
        raise ValueError(f"{raw!r} is a device path; a FileStore needs an ordinary file path.")
    if raw.startswith("\\\\?\\"):
        # Extended-length prefix: \\?\D:\x is D:\x, \\?\UNC\srv\sh\x is \\srv\sh\x.
        rest = raw[4:]
        raw = "\\\\" + rest[4:] if rest[:4].upper() == "UNC\\" else rest
    _check_characters(
        raw, "?|*<>\"", "that character is not allowed in a Windows file name."
    )
    p = PureWindowsPath(raw)
    if not (p.drive and p.root):
        # Relative ("pg"), rooted ("\pg") or drive-relative ("D:pg").
        base = PureWindowsPath(os.fspath(cwd) if cwd is not None else os.getcwd())
        if not (base.drive and base.root):
            raise ValueError(
                f"{raw!r} is relative and the working directory {str(base)!r} is not an "
                "absolute Windows path; pass an absolute path such as D:\\ddp\\pg."
            )
        p = base / p
        if not (p.drive and p.root):
            raise ValueError(f"{raw!r} is relative to another drive's directory; write it in full (D:\\...).")
    full = ntpath.normpath(str(p))
    drive, rest = ntpath.splitdrive(full)
    if ":" in (rest if len(drive) == 2 else full):
        # nturl2path splits the URL at ':' (alternate data streams, "a:b").
        raise ValueError(f"The store path {full!r} has a ':' after the drive; torch cannot read it back.")
    if len(drive) == 2:  # PureWindowsPath only takes A-Z as drive letters
        full = drive.upper() + rest  # torch upper-cases the drive anyway
    if rest.strip("\\") == "":
        raise ValueError(f"The store path {full!r} is a drive or share root; it must name a file.")
    return full


def _windows_url(full: str) -> str:
    # url2pathname percent-decodes, so '%' and '#' survive as %25 and %23.
    # Spaces and non-ASCII stay literal: decoding is a no-op for them, and
    # the URL stays readable in logs and settings.
    body = full.replace("%", "%25").replace("#", "%23").replace("\\", "/")
    if full.startswith("\\\\"):
        # UNC: four slashes before //server; url2pathname halves "////".
        return "file:////" + body  # file://////server/share/f
    return "file:///" + body  # file:///D:/pg
