"""Gets uv's executable out of uv's wheel on PyPI, for any platform.

uv publishes its binaries as wheels (``uv-<v>.data/scripts/uv.exe`` on
Windows), so ``pip download --platform ... --only-binary=:all: --no-deps uv``
fetches the Windows binary from a Linux machine too. Downloads are cached
under build/ (gitignored); the version is pinned so every installer ships
the uv the bootstrap was tested with.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

UV_VERSION = "0.13.9"
WINDOWS = "win_amd64"
LINUX = "manylinux_2_17_x86_64"


def fetch_wheel(platform_tag: str, cache_dir: Path, version: str = UV_VERSION) -> Path:
    """uv's wheel for ``platform_tag``, downloaded once into ``cache_dir``."""
    folder = cache_dir / f"uv-{version}-{platform_tag}"
    wheels = sorted(folder.glob(f"uv-{version}-*.whl"))
    if wheels:
        return wheels[0]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--platform", platform_tag, "--dest", str(folder), f"uv=={version}"],
        check=True,
    )
    wheels = sorted(folder.glob(f"uv-{version}-*.whl"))
    if not wheels:
        raise RuntimeError(f"pip downloaded no uv {version} wheel for {platform_tag} into {folder}")
    return wheels[0]


def extract_binary(wheel: Path, dest: Path) -> Path:
    """Writes the wheel's ``uv`` (or ``uv.exe``) binary to ``dest``; returns it."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.split("/")[-1] in ("uv", "uv.exe") and "/scripts/" in n]
        if len(names) != 1:
            raise RuntimeError(f"{wheel.name}: expected one uv binary in .data/scripts, found {names}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(archive.read(names[0]))
    dest.chmod(0o755)
    return dest


def uv_binary(platform_tag: str, cache_dir: Path, version: str = UV_VERSION) -> Path:
    """uv's binary for ``platform_tag``, downloaded and extracted once into ``cache_dir``."""
    name = "uv.exe" if platform_tag.startswith("win") else "uv"
    dest = cache_dir / f"uv-{version}-{platform_tag}-bin" / name
    if not dest.exists():
        extract_binary(fetch_wheel(platform_tag, cache_dir, version), dest)
    return dest
