"""Builds the Windows installer: ``python installer/build.py``.

Works on Linux (makensis from Debian's ``nsis``) and on Windows (NSIS from
nsis.sourceforge.io or ``choco install nsis``), from a clean checkout:

1. the version comes from the package (``ddpstudio.__version__``);
2. the app wheel is built with ``pip wheel --no-deps``;
3. ``uv.exe`` is taken from uv's Windows wheel on PyPI (pinned, cached in build/);
4. the icon and the Welcome-page picture come from ``resources/``; ``finish-setup.cmd``
   (what the "Finish setting up DDP Studio" shortcut runs) is written for this wheel;
5. makensis compiles installer/ddpstudio.nsi into ``dist/DDPStudio-Setup-<version>.exe``.

``--target x86-unicode`` for NSIS' Windows package, which has no amd64 stubs;
``--uv-exe`` ships another uv.exe (the Wine test's stand-in); ``--wheel`` ships a wheel built
beforehand (the tests build the app's wheel once a session, not once per file).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import uvbinary  # noqa: E402  (installer/ is not a package)

SCRIPT = HERE / "ddpstudio.nsi"
ICON = REPO / "resources" / "ddpstudio.ico"
WELCOME = REPO / "resources" / "installer-welcome.bmp"


def package_version(repo: Path = REPO) -> str:
    """``ddpstudio.__version__``, read from the source without importing the package."""
    text = (repo / "ddpstudio" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', text, re.M)
    if not match:
        raise SystemExit("ddpstudio/__init__.py has no __version__")
    return match.group(1)


def python_version(repo: Path = REPO) -> str:
    """The Python the bootstrap uses (``ddpstudio.bootstrap.pins.PYTHON_VERSION``)."""
    text = (repo / "ddpstudio" / "bootstrap" / "pins.py").read_text(encoding="utf-8")
    match = re.search(r'^PYTHON_VERSION\s*=\s*["\']([^"\']+)["\']', text, re.M)
    if not match:
        raise SystemExit("ddpstudio/bootstrap/pins.py has no PYTHON_VERSION")
    return match.group(1)


def version_quad(version: str) -> str:
    """Windows' file version: four numbers ("0.2.0rc1" -> "0.2.0.0")."""
    numbers = [int(n) for n in re.findall(r"\d+", version.split("+")[0].split("rc")[0].split("a")[0].split("b")[0])]
    return ".".join(str(n) for n in (numbers + [0, 0, 0, 0])[:4])


def build_wheel(out_dir: Path, repo: Path = REPO) -> Path:
    """The app's wheel (no dependencies: the bootstrap installs those)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("ddpstudio-*.whl"):
        old.unlink()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out_dir), str(repo)],
        check=True,
    )
    wheels = sorted(out_dir.glob("ddpstudio-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one ddpstudio wheel in {out_dir}, found {[w.name for w in wheels]}")
    return wheels[0]


def find_makensis(explicit: str | None = None) -> str:
    """makensis from --makensis, PATH, or NSIS' default Windows folders."""
    candidates = [explicit] if explicit else []
    candidates.append(shutil.which("makensis"))
    for base in (os.environ.get("ProgramFiles(x86)"), os.environ.get("ProgramFiles")):
        if base:
            candidates.append(str(Path(base) / "NSIS" / "makensis.exe"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise SystemExit("makensis not found: install NSIS (Debian: apt-get install nsis; Windows: choco install nsis)")


TARGETS = ("amd64-unicode", "x86-unicode")


def finish_setup_script(wheel_name: str, python: str) -> str:
    """finish-setup.cmd: the installer's Python steps, then the launcher. The
    "Finish setting up DDP Studio" shortcut runs it when the installer could
    not download Python; once the launcher exists it only starts the app.
    ``if errorlevel 1`` rather than ``||``: Wine 8's cmd runs the right side of
    ``||`` even after success."""
    return "\r\n".join([
        "@echo off",
        "rem Written by DDP Studio's installer (installer/build.py). Finishes the setup, then starts DDP Studio.",
        "setlocal",
        'set "HERE=%~dp0."',
        'set "UV_PYTHON_INSTALL_DIR=%HERE%\\python"',
        'set "UV_CACHE_DIR=%HERE%\\cache"',
        'set "VIRTUAL_ENV="',
        'if exist "%HERE%\\bootstrap\\Scripts\\pythonw.exe" goto launch',
        f"echo Getting Python {python} for DDP Studio...",
        f'"%HERE%\\uv.exe" python install {python} --no-config --no-bin --no-registry',
        "if errorlevel 1 goto failed",
        f'"%HERE%\\uv.exe" venv --no-config --python {python} --managed-python --clear "%HERE%\\bootstrap"',
        "if errorlevel 1 goto failed",
        f'"%HERE%\\uv.exe" pip install --no-config --python "%HERE%\\bootstrap\\Scripts\\python.exe" --no-deps --reinstall "%HERE%\\wheels\\{wheel_name}"',
        "if errorlevel 1 goto failed",
        ":launch",
        'start "" "%HERE%\\bootstrap\\Scripts\\pythonw.exe" -m ddpstudio.bootstrap launch --root "%HERE%"',
        "exit /b 0",
        ":failed",
        "echo.",
        "echo DDP Studio could not download Python. Check the internet connection. At work, the proxy or firewall",
        "echo must allow releases.astral.sh and github.com (Python) and pypi.org, files.pythonhosted.org and",
        "echo download.pytorch.org (packages). A proxy is taken from HTTPS_PROXY, the Windows certificate store is",
        "echo used with UV_SYSTEM_CERTS=true, and UV_PYTHON_INSTALL_MIRROR replaces the Python download site.",
        "pause",
        "exit /b 3",
        "",
    ])


def stage(build_dir: Path, wheel: Path, uv_exe: Path | None = None) -> Path:
    """Collects exactly what the installer ships into one folder."""
    folder = build_dir / "stage"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "wheels").mkdir(parents=True)
    shutil.copy2(wheel, folder / "wheels" / wheel.name)
    shutil.copy2(ICON, folder / "ddpstudio.ico")
    shutil.copy2(WELCOME, folder / "installer-welcome.bmp")  # compiled into the installer's pages, not installed
    shutil.copy2(uv_exe or uvbinary.uv_binary(uvbinary.WINDOWS, build_dir / "uv-cache"), folder / "uv.exe")
    (folder / "finish-setup.cmd").write_bytes(finish_setup_script(wheel.name, python_version()).encode("ascii"))
    return folder


def compile_installer(
    makensis: str, staged: Path, wheel: Path, version: str, out_file: Path, target: str = TARGETS[0],
    compress: bool = True, warnings_are_errors: bool = True,
) -> None:
    out_file.parent.mkdir(parents=True, exist_ok=True)
    defines = {
        "VERSION": version,
        "VERSION_QUAD": version_quad(version),
        "APP_WHEEL": wheel.name,
        "PYTHON_VERSION": python_version(),
        "STAGE": str(staged),
        "OUTFILE": str(out_file),
        "TARGET": target,
    }
    if not compress:
        defines["NO_COMPRESS"] = "1"
    # -WX: a warning (an unused function, a missing file) fails the build. The tests build with
    # Debian's makensis and keep it; --allow-warnings is for an NSIS whose version we do not pin.
    strict = ["-WX"] if warnings_are_errors else []
    command = [makensis, "-V2", *strict, "-NOCD", *(f"-D{k}={v}" for k, v in defines.items()), str(SCRIPT)]
    subprocess.run(command, check=True, cwd=HERE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, default=REPO / "dist", help="where the installer goes (default: dist/)")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "installer", help="staging and download cache")
    parser.add_argument("--makensis", help="path to makensis (default: PATH, then NSIS' Windows folders)")
    parser.add_argument("--target", choices=TARGETS, default=TARGETS[0], help="NSIS target (Windows' NSIS package: x86-unicode)")
    parser.add_argument("--uv-exe", type=Path, help="ship this uv.exe instead of the one from uv's wheel")
    parser.add_argument("--wheel", type=Path, help="ship this app wheel instead of building one from the checkout")
    parser.add_argument("--no-compress", action="store_true",
                        help="store the files uncompressed (for tests: seconds instead of a minute, same behaviour)")
    parser.add_argument("--allow-warnings", action="store_true",
                        help="makensis warnings do not fail the build (default: -WX, they do); for an NSIS "
                             "release other than the one the tests use, whose new warnings would")
    args = parser.parse_args(argv)

    for needed in (ICON, WELCOME):
        if not needed.is_file():
            raise SystemExit(f"{needed} is missing: run python resources/make_icon.py")
    version = package_version()
    makensis = find_makensis(args.makensis)
    build_dir = args.build_dir.resolve()
    wheel = args.wheel.resolve() if args.wheel else build_wheel(build_dir / "dist")
    staged = stage(build_dir, wheel, args.uv_exe)
    out_file = args.out_dir.resolve() / f"DDPStudio-Setup-{version}.exe"
    compile_installer(makensis, staged, wheel, version, out_file, args.target, not args.no_compress,
                      warnings_are_errors=not args.allow_warnings)
    print(f"{out_file} ({out_file.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
