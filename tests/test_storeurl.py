"""file_store_url / store_path_from_url, checked against torch's own rendezvous parsing.

POSIX URLs go through torch's real ``rendezvous()`` and a real FileStore.
Windows URLs go through the same torch code with the three things it reads
from the host at call time swapped for their Windows versions (see
``torch_windows_store_path``).
"""

from __future__ import annotations

import ntpath
import nturl2path
import os
import sys
import types
import urllib.request
from pathlib import PureWindowsPath

import pytest
import torch.distributed as dist

from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.rendezvous.storeurl import file_store_url, store_path_from_url

# The module, not the ``rendezvous`` function that torch.distributed re-exports.
rdzv = sys.modules["torch.distributed.rendezvous"]

# (input path, URL we must produce, path torch's win32 branch must read back)
WINDOWS_VECTORS = [
    (r"D:\pg", "file:///D:/pg", r"D:\pg"),
    ("D:/pg", "file:///D:/pg", r"D:\pg"),
    (r"d:\tmp\some file", "file:///D:/tmp/some file", r"D:\tmp\some file"),
    ("C:\\Users\\Jürgen\\データ\\pg", "file:///C:/Users/Jürgen/データ/pg", "C:\\Users\\Jürgen\\データ\\pg"),
    (r"\\server\share\f", "file://////server/share/f", r"\\server\share\f"),
    ("//server/share/sub dir/f", "file://////server/share/sub dir/f", r"\\server\share\sub dir\f"),
    (r"\\?\D:\long\pg", "file:///D:/long/pg", r"D:\long\pg"),
    (r"\\?\UNC\server\share\f", "file://////server/share/f", r"\\server\share\f"),
    (r"D:\a#b\100%\x;y", "file:///D:/a%23b/100%25/x;y", r"D:\a#b\100%\x;y"),
    (r"D:\runs\..\pg", "file:///D:/pg", r"D:\pg"),
    # relative forms, against cwd C:\work
    ("pg", "file:///C:/work/pg", r"C:\work\pg"),
    (r"\pg", "file:///C:/pg", r"C:\pg"),
    ("C:pg", "file:///C:/work/pg", r"C:\work\pg"),
]

POSIX_VECTORS = [
    ("/tmp/pg", "file:///tmp/pg", "/tmp/pg"),
    ("/tmp/some dir/pg", "file:///tmp/some dir/pg", "/tmp/some dir/pg"),
    ("/home/jürgen/データ/pg", "file:///home/jürgen/データ/pg", "/home/jürgen/データ/pg"),
    ("/tmp/100%20/a;b", "file:///tmp/100%20/a;b", "/tmp/100%20/a;b"),  # torch never unquotes
    ("//tmp//pg", "file:///tmp/pg", "/tmp/pg"),
    ("/tmp/runs/../pg", "file:///tmp/pg", "/tmp/pg"),
    ("pg", "file:///work/pg", "/work/pg"),  # relative, against cwd /work
]


class _RecordingFileStore:
    """Stands in for FileStore when the path is a Windows path on this Linux box."""

    def __init__(self, path: str, world_size: int) -> None:
        self.path = path
        self.world_size = world_size


def torch_windows_store_path(url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The path torch 2.14.1's own ``rendezvous()`` gives FileStore on win32.

    ``_file_rendezvous_handler`` (torch/distributed/rendezvous.py:126-151)
    reads ``sys.platform``, ``urllib.request.url2pathname`` and
    ``os.path.normpath`` when called, so we swap those for their Windows
    versions (``nturl2path`` is what urllib.request uses on Windows) and run
    torch's code unchanged, including the urlunparse round trip of
    ``_rendezvous_helper`` (lines 73-101).
    """
    with monkeypatch.context() as m:
        m.setattr(rdzv, "sys", types.SimpleNamespace(platform="win32"))
        m.setattr(rdzv, "os", types.SimpleNamespace(path=ntpath, environ=os.environ))
        m.setattr(urllib.request, "url2pathname", nturl2path.url2pathname)
        m.setattr(rdzv, "FileStore", _RecordingFileStore)
        store, rank, world_size = next(rdzv.rendezvous(url, rank=0, world_size=1))
    assert (rank, world_size) == (0, 1)
    return store.path


@pytest.mark.parametrize(("path", "url", "read_back"), WINDOWS_VECTORS)
def test_windows_vectors_match_torch(path, url, read_back, monkeypatch):
    assert file_store_url(path, WINDOWS, cwd="C:\\work") == url
    assert store_path_from_url(url, WINDOWS) == read_back
    assert torch_windows_store_path(url, monkeypatch) == read_back


@pytest.mark.parametrize(("path", "url", "read_back"), POSIX_VECTORS)
def test_posix_vectors(path, url, read_back):
    assert file_store_url(path, LINUX, cwd="/work") == url
    assert store_path_from_url(url, LINUX) == read_back


def test_windows_url_forms_we_never_write(monkeypatch):
    # Two slashes: hung for a user (pytorch #64419). This torch reads D:\x
    # from it, but nothing guarantees that for other versions.
    assert file_store_url(r"D:\x", WINDOWS) == "file:///D:/x"
    assert not file_store_url(r"D:\x", WINDOWS).startswith("file://D:")
    # Path.as_uri() for a share: torch glues netloc + path without the "//"
    # and opens a *relative* file.
    as_uri = PureWindowsPath(r"\\server\share\f").as_uri()
    assert as_uri == "file://server/share/f"
    ours = file_store_url(r"\\server\share\f", WINDOWS)
    assert ours != as_uri
    assert torch_windows_store_path(as_uri, monkeypatch) == r"server\share\f"
    assert store_path_from_url(as_uri, WINDOWS) == r"server\share\f"
    # Four slashes lose two more in rendezvous()'s urlunparse (Python 3.10-3.12): also relative.
    assert torch_windows_store_path("file:////server/share/f", monkeypatch) == r"server\share\f"
    assert store_path_from_url("file:////server/share/f", WINDOWS) == r"server\share\f"


@pytest.mark.parametrize(
    ("user_url", "path"),
    [
        ("file:///D:\\pg", r"D:\pg"),  # the PyTorch-on-Windows blog's habit
        ("file:///d:/tmp/some_file", r"D:\tmp\some_file"),  # torch docs
        ("file://////machine/share/some_file", r"\\machine\share\some_file"),  # torch docs
        ("file:///D:/pg?rank=1&world_size=4", r"D:\pg"),
        ("file:///D:/a%20b", r"D:\a b"),  # Windows does percent-decode
    ],
)
def test_users_windows_urls(user_url, path, monkeypatch):
    assert store_path_from_url(user_url, WINDOWS) == path
    if "rank=" not in user_url:  # torch refuses rank in the URL and an explicit rank
        assert torch_windows_store_path(user_url, monkeypatch) == path


def test_posix_file_lands_where_torch_puts_it(tmp_path):
    folder = tmp_path / "some dir" / "Jürgen データ"
    folder.mkdir(parents=True)
    target = folder / "pg store;100%20"
    url = file_store_url(target, LINUX)
    assert url == "file://" + str(target)
    assert store_path_from_url(url, LINUX) == str(target)
    store, rank, world_size = next(dist.rendezvous(url, rank=0, world_size=1))
    try:
        store.set("k", "v")
        assert store.get("k") == b"v"
        assert target.is_file()
        assert sorted(p.name for p in folder.iterdir()) == [target.name]
    finally:
        del store


def test_posix_percent_escape_is_not_decoded(tmp_path):
    # What a hand-written, "properly" escaped URL does on POSIX: torch
    # (rendezvous.py:131) uses the escape literally.
    url = f"file://{tmp_path}/a%20b"
    store, _, _ = next(dist.rendezvous(url, rank=0, world_size=1))
    try:
        assert (tmp_path / "a%20b").is_file()
        assert not (tmp_path / "a b").exists()
        assert store_path_from_url(url, LINUX) == f"{tmp_path}/a%20b"
    finally:
        del store


def test_real_gloo_group_on_awkward_path(tmp_path):
    target = tmp_path / "run 1 ü" / "pg"
    target.parent.mkdir()
    dist.init_process_group("gloo", init_method=file_store_url(target, LINUX), rank=0, world_size=1)
    try:
        assert target.is_file()
        assert dist.get_world_size() == 1
    finally:
        dist.destroy_process_group()


def test_posix_double_slash_would_lose_the_path():
    # Why file_store_url collapses "//x": rendezvous()'s urlunparse turns
    # file:////x into file://x, which torch reads as "path missing".
    assert file_store_url("//x/pg", LINUX) == "file:///x/pg"
    with pytest.raises(ValueError, match="names no file"):
        store_path_from_url("file:////x", LINUX)
    with pytest.raises(ValueError, match="path missing"):
        next(dist.rendezvous("file:////x", rank=0, world_size=1))


def test_round_trip_awkward_names():
    names = ["a b", "ü", "データ", "a;b", "a,b", "a&b=c", "a+b", "a$b", "a@b", "(a)", "[a]", "{a}",
             "a~b", "a'b", "a!b", "100%", "%41", "a%20b", " lead", "trail ", "a.b.", "ünï cödé ✓"]
    for name in names:
        posix = f"/tmp/{name}/pg"
        assert store_path_from_url(file_store_url(posix, LINUX), LINUX) == posix
        win = f"D:\\{name}\\pg"
        assert store_path_from_url(file_store_url(win, WINDOWS), WINDOWS) == win
        unc = f"\\\\srv\\share\\{name}\\pg"
        assert store_path_from_url(file_store_url(unc, WINDOWS), WINDOWS) == unc
    for name in ["a#b", "#"]:  # '#' is escaped on Windows, impossible on POSIX
        win = f"D:\\{name}\\pg"
        assert store_path_from_url(file_store_url(win, WINDOWS), WINDOWS) == win


@pytest.mark.parametrize(
    ("path", "platform", "message"),
    [
        ("/tmp/a?b", LINUX, r"contains '\?'"),
        ("/tmp/a#b", LINUX, "contains '#'"),
        ("/tmp/a\nb", LINUX, "control character"),
        ("/", LINUX, "root directory"),
        (r"D:\a?b", WINDOWS, r"contains '\?'"),
        ("D:\\a\tb", WINDOWS, "control character"),
        (r"D:\pg:stream", WINDOWS, "':' after the drive"),
        ("E:pg", WINDOWS, "another drive"),
        ("D:\\", WINDOWS, "drive or share root"),
        (r"\\server\share", WINDOWS, "drive or share root"),
        (r"\\.\pipe\x", WINDOWS, "device path"),
        ("1:\\x", WINDOWS, "':' after the drive"),  # "1:" is no drive letter
    ],
)
def test_inexpressible_paths_raise(path, platform, message):
    with pytest.raises(ValueError, match=message):
        file_store_url(path, platform, cwd="C:\\work" if platform.is_windows else "/work")


def test_windows_relative_path_needs_a_windows_cwd():
    with pytest.raises(ValueError, match="absolute Windows path"):
        file_store_url("pg", WINDOWS, cwd="/work")


@pytest.mark.parametrize("url", ["tcp://127.0.0.1:29500", "env://", "/tmp/pg"])
def test_store_path_from_url_rejects_other_schemes(url):
    with pytest.raises(ValueError, match="not a file:// URL"):
        store_path_from_url(url, LINUX)
