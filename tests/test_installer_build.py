"""``python installer/build.py`` builds a real installer; 7z shows what it carries."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "installer"))

import build  # noqa: E402  (installer/build.py)

_needs_makensis_and_7z = pytest.mark.skipif(
    not (shutil.which("makensis") and shutil.which("7z")), reason="needs makensis and 7z (apt-get install nsis p7zip-full)"
)
# Debian's makensis has the amd64 stubs; on Windows the workflow builds the installer itself (x86-unicode).
_debian_makensis = pytest.mark.posix_only("builds with Debian's makensis and its amd64 stubs")


def needs_tools(test):
    return _debian_makensis(_needs_makensis_and_7z(test))


def no_process_left() -> None:
    assert psutil.Process().children(recursive=True) == []


def listing(archive: Path) -> dict[str, str]:
    """7z's technical listing: the archive's properties and its paths."""
    out = subprocess.run(["7z", "l", "-slt", str(archive)], capture_output=True, text=True, check=True, timeout=120).stdout
    props = dict(re.findall(r"^(Type|SubType|64-bit) = (.*)$", out, re.M))
    props["paths"] = "\n".join(re.findall(r"^Path = (.*)$", out, re.M)[1:])  # the first is the archive itself
    return props


@pytest.fixture(scope="module")
def installer(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # Uncompressed (SetCompress off): 3 s instead of 24 s of makensis's LZMA, the largest single cost of the suite's
    # CPU form (57 s of wall time at the start of a CI-like run); the same files, the same script otherwise. The
    # windows-latest workflow builds the compressed installer that ships.
    proc = subprocess.run([sys.executable, str(REPO / "installer" / "build.py"), "--out-dir", str(out), "--no-compress"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    no_process_left()
    found = list(out.glob("DDPStudio-Setup-*.exe"))
    assert len(found) == 1, found
    print(f"\ninstaller: {found[0].name}, {found[0].stat().st_size / 1e6:.1f} MB")
    return found[0]


@pytest.mark.slow
@needs_tools
def test_installer_is_named_after_the_package_version(installer):
    assert installer.name == f"DDPStudio-Setup-{build.package_version()}.exe"
    assert 5e6 < installer.stat().st_size < 40e6  # uv.exe dominates; torch is never inside


@pytest.mark.slow
@needs_tools
def test_installer_contents(installer, tmp_path):
    props = listing(installer)
    assert props["Type"] == "Nsis" and props["SubType"].startswith("NSIS-3 Unicode 64-bit")
    paths = set(props["paths"].splitlines())
    wheel = f"wheels/ddpstudio-{build.package_version()}-py3-none-any.whl"
    assert {"uv.exe", "ddpstudio.ico", "finish-setup.cmd", wheel, "Uninstall.exe"} <= paths, paths

    subprocess.run(["7z", "x", "-y", f"-o{tmp_path}", str(installer), "uv.exe", "ddpstudio.ico", wheel, "Uninstall.exe"],
                   check=True, capture_output=True, timeout=120)
    assert (tmp_path / "uv.exe").read_bytes()[:2] == b"MZ"  # a Windows executable
    assert (tmp_path / "ddpstudio.ico").read_bytes() == (REPO / "resources" / "ddpstudio.ico").read_bytes()
    with zipfile.ZipFile(tmp_path / wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "ddpstudio/bootstrap/__main__.py" in names and "ddpstudio/cli/main.py" in names
    assert "ddpstudio-gui = ddpstudio.cli.main:gui_main" in entry_points
    # The uninstaller is itself an NSIS program, compiled from our Uninstall section.
    assert listing(tmp_path / "Uninstall.exe")["SubType"].endswith("(Uninstall)")
    no_process_left()


@needs_tools
def test_script_refuses_to_compile_without_the_build_defines(tmp_path):
    proc = subprocess.run(["makensis", "-V2", str(REPO / "installer" / "ddpstudio.nsi")], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "build with installer/build.py" in proc.stdout + proc.stderr
    no_process_left()


@pytest.mark.slow
@needs_tools
def test_x86_unicode_target_compiles(installer, tmp_path):
    """NSIS' Windows package has no amd64 stubs; the workflow builds with --target x86-unicode."""
    staged = REPO / "build" / "installer" / "stage"  # what the module's build staged
    wheel = next((staged / "wheels").glob("ddpstudio-*.whl"))
    out = tmp_path / "DDPStudio-Setup-x86.exe"
    build.compile_installer(build.find_makensis(), staged, wheel, build.package_version(), out, "x86-unicode",
                            compress=False)  # the module's build already checks the compressed form
    props = listing(out)
    assert props["Type"] == "Nsis" and props["SubType"].startswith("NSIS-3 Unicode") and "64-bit" not in props["SubType"]
    assert "finish-setup.cmd" in props["paths"].splitlines()
    no_process_left()


def test_finish_setup_script_repeats_the_installers_python_steps():
    script = build.finish_setup_script("ddpstudio-9.9.9-py3-none-any.whl", "3.11")
    nsis = (REPO / "installer" / "ddpstudio.nsi").read_text(encoding="utf-8")
    assert script.count("\r\n") == len(script.splitlines()) and script.isascii()  # cmd.exe wants CRLF
    for step in ("python install 3.11 --no-config --no-bin --no-registry",
                 "venv --no-config --python 3.11 --managed-python --clear",
                 "pip install --no-config --python", "--no-deps --reinstall"):
        assert step in script
    assert "python install ${PYTHON_VERSION} --no-config --no-bin --no-registry" in nsis  # the same flags there
    assert script.count("if errorlevel 1 goto failed") == 3 and "||" not in script
    assert "wheels\\ddpstudio-9.9.9-py3-none-any.whl" in script
    assert '-m ddpstudio.bootstrap launch --root "%HERE%"' in script


def test_network_help_names_the_hosts_setup_uses():
    """The installer's, finish-setup.cmd's and the bootstrap's network help name the same hosts and settings."""
    from ddpstudio.bootstrap import network

    nsis = (REPO / "installer" / "ddpstudio.nsi").read_text(encoding="utf-8")
    script = build.finish_setup_script("w.whl", "3.11")
    for host in network.HOSTS:
        assert host.name in nsis and host.name in script and host.name in network.help_text(), host.name
    for setting in ("HTTPS_PROXY", "UV_SYSTEM_CERTS", "UV_PYTHON_INSTALL_MIRROR"):
        assert setting in nsis and setting in script and setting in network.help_text(), setting


def test_version_helpers():
    assert build.version_quad("0.1.0") == "0.1.0.0"
    assert build.version_quad("1.2") == "1.2.0.0"
    assert build.version_quad("0.2.0rc1") == "0.2.0.0"
    import ddpstudio
    from ddpstudio.bootstrap import pins

    assert build.package_version() == ddpstudio.__version__
    assert build.python_version() == pins.PYTHON_VERSION


def test_nsis_script_names_what_the_bootstrap_expects():
    """The installer's folder layout and the bootstrap's Layout must agree."""
    from ddpstudio.bootstrap.layout import Layout
    from ddpstudio.core.platform import WINDOWS

    script = (REPO / "installer" / "ddpstudio.nsi").read_text(encoding="utf-8")
    layout = Layout(Path("ROOT"), WINDOWS)
    for path in (layout.uv, layout.python_dir, layout.cache_dir, layout.env, layout.bootstrap_env, layout.wheels_dir):
        assert f"$INSTDIR\\{path.name}" in script, path.name
    assert "$INSTDIR\\bootstrap\\Scripts\\pythonw.exe" in script
    assert "-m ddpstudio.bootstrap launch" in script and "-m ddpstudio.bootstrap repair" in script
    assert 'InstallDir "$LOCALAPPDATA\\Programs\\${APP_ID}"' in script and "RequestExecutionLevel user" in script
    assert "Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\${APP_ID}" in script


# The uninstaller's Win32 calls, as compiled (System plugin type strings): the Restart Manager
# first, then the Toolhelp scan of the install folder.
UNINSTALLER_CALLS = (
    "rstrtmgr::RmStartSession(*i .r1, i 0, w .r2) i .r3",
    "rstrtmgr::RmRegisterResources(i r1, i $RmCount, p $RmFiles, i 0, p 0, i 0, p 0) i .r3",
    "rstrtmgr::RmGetList(i r1, *i .r3, *i r6 r4, p r5, *i .r8) i .r2",
    "rstrtmgr::RmEndSession(i r1) i",
    "kernel32::CreateToolhelp32Snapshot(i 2, i 0) p .r1",
)


def test_uninstallers_restart_manager_layout_is_the_apps():
    """ddpstudio.nsi reads RM_PROCESS_INFO with the offsets core/process/restartmgr.py declares (one layout)."""
    from ddpstudio.core.process import restartmgr

    script = (REPO / "installer" / "ddpstudio.nsi").read_text(encoding="utf-8")
    defined = dict(re.findall(r"^!define (RM_\w+) (\d+)", script, re.M))
    assert int(defined["RM_PROCESS_INFO_SIZE"]) == ctypes.sizeof(restartmgr.RM_PROCESS_INFO) == 668
    assert int(defined["RM_APP_NAME_OFFSET"]) == restartmgr.RM_PROCESS_INFO.strAppName.offset
    assert int(defined["RM_APP_NAME_CHARS"]) == restartmgr.CCH_RM_MAX_APP_NAME + 1
    assert f"ERROR_MORE_DATA {restartmgr.ERROR_MORE_DATA}" in script
    for call in UNINSTALLER_CALLS:
        assert call in script, call


@pytest.mark.slow
@needs_tools
@pytest.mark.parametrize("target", build.TARGETS)
def test_both_targets_compile_the_restart_manager_path(installer, tmp_path, target):
    """The compiled uninstaller of an amd64 and of an x86 build carries the Restart Manager calls and the fallback."""
    staged = REPO / "build" / "installer" / "stage"  # what the module's build staged
    wheel = next((staged / "wheels").glob("ddpstudio-*.whl"))
    out = tmp_path / f"DDPStudio-Setup-{target}.exe"
    # Uncompressed, so the uninstaller's script strings can be read in its file.
    build.compile_installer(build.find_makensis(), staged, wheel, build.package_version(), out, target, compress=False)
    subprocess.run(["7z", "x", "-y", f"-o{tmp_path}", str(out), "Uninstall.exe"], check=True, capture_output=True, timeout=120)
    uninstaller = tmp_path / "Uninstall.exe"
    assert ("64-bit" in listing(uninstaller)["SubType"]) is (target == "amd64-unicode")
    strings = uninstaller.read_bytes()
    for call in UNINSTALLER_CALLS:
        for piece in re.split(r"\$\w+", call):  # a variable is compiled into a code, the rest stays text
            assert piece.encode("utf-16-le") in strings, (target, call, piece)
    no_process_left()
