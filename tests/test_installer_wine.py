"""The real installer and uninstaller, run silently under Wine on Linux.

uv.exe and python.exe are stand-ins built here from C with mingw-w64
(tests/scripts/wine_stub.c): the real uv.exe does not start under Wine 8 and
no Windows CPython can be had, so they only record their exact command line
and create the files the real tools would create. Everything else is real:
the NSIS installer built by installer/build.py, its shortcuts, its registry
entry (read back with ``wine reg query``), finish-setup.cmd run by Wine's
cmd.exe, the uninstaller, and a file held open by a Windows process.

Needs Debian's ``wine64``, ``gcc-mingw-w64-x86-64`` and ``nsis`` (``bash
scripts/dev-env.sh --test`` installs them as root). Each test ends with
``wineserver -k``; the prefix and HOME are private folders under tmp, and
Wine's menu integration is off, so nothing leaks into the real home.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path, PureWindowsPath

import psutil
import pytest

from tests.wine import first_server_of

REPO = Path(__file__).resolve().parents[1]
STUB_SOURCE = REPO / "tests" / "scripts" / "wine_stub.c"
RM_STANDIN_SOURCE = REPO / "tests" / "scripts" / "rstrtmgr_standin.c"
KEY = r"HKCU\Software\Microsoft\Windows\CurrentVersion\Uninstall\DDPStudio"
MINGW = "x86_64-w64-mingw32-gcc"


def _missing() -> str | None:
    if sys.platform != "linux":
        return "runs the Windows installer under Wine on Linux"
    wanted = {"wine": "wine64", "wineserver": "wine64", MINGW: "gcc-mingw-w64-x86-64", "makensis": "nsis"}
    absent = sorted({package for tool, package in wanted.items() if not shutil.which(tool)})
    if absent:
        return f"needs the Debian packages {', '.join(absent)} (bash scripts/dev-env.sh --test installs them as root)"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.posix_only("runs the Windows installer under Wine"),
    pytest.mark.timeout(300),
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
]


class Wine:
    """One private Wine prefix: runs Windows programs, maps paths, reads the registry."""

    def __init__(self, base: Path) -> None:
        self.prefix = base / "prefix"
        home = base / "home"
        home.mkdir(parents=True, exist_ok=True)
        self.log = base / "calls.log"
        # Not DDPSTUDIO_HOME and friends: wineserver outlives a test's home, so it is checked here instead.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DDPSTUDIO", "STUB_", "WINE"))}
        self.env.update(
            WINEPREFIX=str(self.prefix), WINEDEBUG="-all", HOME=str(home), XDG_DATA_HOME=str(home / "data"),
            XDG_CONFIG_HOME=str(home / "config"), DISPLAY="",
            WINEDLLOVERRIDES="mscoree,mshtml,winemenubuilder.exe=d",  # no Mono/Gecko prompts, no Linux menu entries
            STUB_LOG=self.windows(self.log),
        )

    def boot(self) -> None:
        first_server_of(self.prefix, self.env)
        subprocess.run(["wine", "wineboot", "-i"], env=self.env, capture_output=True, timeout=180, check=True)
        desktop = self.user / "Desktop"
        if desktop.is_symlink():  # Wine links it to $HOME; a real folder keeps shortcuts inside the prefix
            desktop.unlink()
            desktop.mkdir()

    @property
    def user(self) -> Path:
        return next(p for p in (self.prefix / "drive_c" / "users").iterdir() if p.name != "Public")

    def install_dir(self) -> Path:
        return self.user / "AppData" / "Local" / "Programs" / "DDPStudio"

    def menu_dir(self) -> Path:
        return self.user / "AppData" / "Roaming" / "Microsoft" / "Windows" / "Start Menu" / "Programs" / "DDP Studio"

    @staticmethod
    def windows(path: Path) -> str:
        return "Z:" + str(path).replace("/", "\\")

    def unix(self, path: str) -> Path:
        win = PureWindowsPath(path)
        assert win.drive.upper() == "C:", path
        return self.prefix / "drive_c" / Path(*win.parts[1:])

    def run(self, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["wine", *args], env={**self.env, **env}, capture_output=True, text=True, timeout=timeout)

    def install(self, setup_exe: Path) -> None:
        """The silent install, which must succeed; a failure says the installer's exit code (its
        ``SetErrorLevel``: 3, Python not downloaded; 8, the Python folder not prepared) and what the
        stand-ins were asked last, so a start that Wine failed under load can be told from a product fault."""
        proc = self.run(str(setup_exe), "/S")
        assert proc.returncode == 0, (f"the installer exited {proc.returncode}; the stand-ins' last calls: "
                                      f"{self.calls()[-6:]}; {proc.stderr[-1500:]}")

    def reg_query(self) -> dict[str, str] | None:
        proc = self.run("reg", "query", KEY)
        if proc.returncode != 0:
            return None
        values = {}
        for line in proc.stdout.replace("\r", "").splitlines():
            parts = line.strip().split(None, 2)
            if len(parts) == 3 and parts[1].startswith("REG_"):
                values[parts[0]] = parts[2]
        return values

    def calls(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    def stop(self) -> None:
        """Ends every process of this prefix; checks none is left."""
        subprocess.run(["wineserver", "-k"], env=self.env, capture_output=True, timeout=60)
        deadline = time.monotonic() + 10
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not self.processes(), [p.info["cmdline"] for p in self.processes()]

    def processes(self) -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if proc.environ().get("WINEPREFIX") == str(self.prefix):
                    found.append(proc)
            except (psutil.Error, OSError):
                continue
        return found


@pytest.fixture(scope="module")
def setup_exe(tmp_path_factory, app_wheel) -> Path:
    """The real installer, carrying the stand-in uv.exe and the session's app wheel."""
    work = tmp_path_factory.mktemp("wine-build")
    stub = work / "uv.exe"
    subprocess.run([MINGW, "-municode", "-O2", "-Wall", "-Werror", "-o", str(stub), str(STUB_SOURCE)], check=True, timeout=120)
    proc = subprocess.run(
        [sys.executable, str(REPO / "installer" / "build.py"), "--out-dir", str(work / "dist"), "--build-dir",
         str(work / "build"), "--uv-exe", str(stub), "--wheel", str(app_wheel), "--no-compress"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return next((work / "dist").glob("DDPStudio-Setup-*.exe"))


@pytest.fixture(scope="module")
def booted(tmp_path_factory) -> Path:
    """One booted prefix for the module (wineboot takes ~15 s); each test cleans up after itself."""
    base = tmp_path_factory.mktemp("wine")
    wine = Wine(base)
    try:
        wine.boot()
    finally:
        wine.stop()
    return base


@pytest.fixture
def wine(booted) -> Wine:
    w = Wine(booted)
    w.log.unlink(missing_ok=True)
    yield w
    try:
        w.stop()
    finally:
        # Leave the prefix as a fresh user would have it: nothing of ours installed.
        for leftover in (w.install_dir(), w.user / "AppData" / "Local" / "DDPStudio", w.menu_dir()):
            shutil.rmtree(leftover, ignore_errors=True)
        for link in (w.user / "Desktop").glob("*.lnk"):
            link.unlink()
        w.run("reg", "delete", KEY, "/f")
        subprocess.run(["wineserver", "-k"], env=w.env, capture_output=True, timeout=60)


def win_dir(wine: Wine) -> str:
    return "C:\\users\\" + wine.user.name + r"\AppData\Local\Programs\DDPStudio"


def lnk_target(link: Path) -> str:
    """The target a .lnk names (the shell link's path, stored as ANSI and/or UTF-16)."""
    data = link.read_bytes()
    for name in ("finish-setup.cmd", "pythonw.exe", "Uninstall.exe"):
        if name.encode("utf-16-le") in data or name.encode("ascii") in data:
            return name
    return "?"


def test_silent_install_files_shortcuts_entry_and_exact_calls(wine, setup_exe):
    started = time.monotonic()
    wine.install(setup_exe)
    took = time.monotonic() - started
    root, here = wine.install_dir(), win_dir(wine)
    for name in ("uv.exe", "ddpstudio.ico", "Uninstall.exe", "finish-setup.cmd", "bootstrap/Scripts/pythonw.exe",
                 "bootstrap/Scripts/python.exe", "env/ddpstudio-environment.json"):
        assert (root / name).is_file(), name
    assert [w.name for w in (root / "wheels").iterdir()] == [f"ddpstudio-{_version()}-py3-none-any.whl"]
    menu = wine.menu_dir()
    assert sorted(p.name for p in menu.iterdir()) == ["DDP Studio.lnk", "Repair DDP Studio.lnk", "Uninstall DDP Studio.lnk"]
    assert lnk_target(menu / "DDP Studio.lnk") == "pythonw.exe" and lnk_target(menu / "Uninstall DDP Studio.lnk") == "Uninstall.exe"
    assert sorted(p.name for p in (wine.user / "Desktop").glob("*.lnk")) == ["DDP Studio.lnk"]
    entry = wine.reg_query()
    assert entry is not None
    assert entry["DisplayName"] == "DDP Studio" and entry["DisplayVersion"] == _version()
    assert entry["InstallLocation"] == here
    assert entry["UninstallString"] == f'"{here}\\Uninstall.exe"'
    assert entry["QuietUninstallString"] == f'"{here}\\Uninstall.exe" /S'
    wheel = f"ddpstudio-{_version()}-py3-none-any.whl"
    assert wine.calls() == [
        f'"{here}\\uv.exe" python install 3.11 --no-config --no-bin --no-registry',
        f'"{here}\\uv.exe" venv --no-config --python 3.11 --managed-python --clear "{here}\\bootstrap"',
        f'"{here}\\uv.exe" pip install --no-config --python "{here}\\bootstrap\\Scripts\\python.exe" --no-deps --reinstall "{here}\\wheels\\{wheel}"',
        f'"{here}\\bootstrap\\Scripts\\python.exe" -m ddpstudio.bootstrap setup --root "{here}" --no-window',
    ]
    print(f"\nsilent install under Wine: {took:.1f} s")


def test_the_bootstraps_exit_code_becomes_the_installers(wine, setup_exe):
    proc = wine.run(str(setup_exe), "/S", STUB_BOOTSTRAP_EXIT="4")  # 4: driver too old
    assert proc.returncode == 4
    assert wine.calls()[-1].endswith("-m ddpstudio.bootstrap setup --root \"" + win_dir(wine) + "\" --no-window")
    assert not (wine.install_dir() / "env" / "ddpstudio-environment.json").exists()
    assert (wine.menu_dir() / "DDP Studio.lnk").is_file()  # the app's shortcut finishes the setup on first start
    assert wine.reg_query() is not None


def test_a_failed_python_download_leaves_working_shortcuts(wine, setup_exe):
    proc = wine.run(str(setup_exe), "/S", STUB_FAIL_PYTHON="1")
    assert proc.returncode == 3  # no network
    root, here = wine.install_dir(), win_dir(wine)
    assert wine.calls() == [f'"{here}\\uv.exe" python install 3.11 --no-config --no-bin --no-registry']
    assert not (root / "bootstrap").exists()
    menu = wine.menu_dir()
    assert sorted(p.name for p in menu.iterdir()) == ["Finish setting up DDP Studio.lnk", "Uninstall DDP Studio.lnk"]
    assert sorted(p.name for p in (wine.user / "Desktop").glob("*.lnk")) == ["Finish setting up DDP Studio.lnk"]
    assert lnk_target(menu / "Finish setting up DDP Studio.lnk") == "finish-setup.cmd"
    assert wine.reg_query()["DisplayName"] == "DDP Studio"  # and Uninstall.exe is there to use it
    assert (root / "Uninstall.exe").is_file()

    # What the shortcut runs, with the network back: the same uv steps, then the launcher.
    proc = wine.run("cmd", "/c", here + "\\finish-setup.cmd", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    deadline = time.monotonic() + 30  # `start` does not wait for the launcher
    while not any("ddpstudio.bootstrap launch" in c for c in wine.calls()) and time.monotonic() < deadline:
        time.sleep(0.2)
    calls = wine.calls()[1:]
    assert [c.split(" ", 2)[1] for c in calls[:3]] == ["python", "venv", "pip"]
    assert "--managed-python --clear" in calls[1] and "--no-deps --reinstall" in calls[2]
    # Wine's `start` re-quotes the arguments (drops quotes around words without spaces): compare unquoted.
    assert calls[3].replace('"', "").endswith(f"-m ddpstudio.bootstrap launch --root {here}\\."), calls[3]
    assert "bootstrap\\Scripts\\pythonw.exe" in calls[3]
    assert (root / "bootstrap" / "Scripts" / "pythonw.exe").is_file()


def test_silent_uninstall_keeps_data_unless_removedata(wine, setup_exe):
    data = wine.user / "AppData" / "Local" / "DDPStudio"
    for flags, data_kept in (([], True), (["/REMOVEDATA"], False)):
        wine.install(setup_exe)
        (data / "runs").mkdir(parents=True, exist_ok=True)
        (data / "runs" / "registry.json").write_text("{}")
        # Without _?= the uninstaller copies itself to %TEMP% and returns at once: wait for Wine's processes.
        assert wine.run(str(wine.install_dir() / "Uninstall.exe"), "/S", *flags).returncode == 0
        subprocess.run(["wineserver", "-w"], env=wine.env, timeout=120)
        assert not wine.install_dir().exists()
        assert not wine.menu_dir().exists() and not list((wine.user / "Desktop").glob("*.lnk"))
        assert wine.reg_query() is None
        assert data.exists() is data_kept, flags


def test_uninstall_while_a_file_is_held_keeps_the_entry_and_names_the_holder(wine, setup_exe):
    wine.install(setup_exe)
    root, here = wine.install_dir(), win_dir(wine)
    held, release = root / "env" / "checkpoint.pt", wine.prefix / "release"
    holder = subprocess.Popen(
        ["wine", str(root / "env" / "Scripts" / "python.exe"), "--hold", here + "\\env\\checkpoint.pt", wine.windows(release)],
        env=wine.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not Path(str(held) + ".held").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert Path(str(held) + ".held").exists(), "the holder did not start"
        # _?= runs the uninstaller in place, so its exit code is ours to read.
        proc = wine.run(str(root / "Uninstall.exe"), "/S", "_?=" + here)
        assert proc.returncode == 9  # files in use
        assert held.exists() and wine.reg_query() is not None  # the entry stays until the files are gone
        assert (root / "Uninstall.exe").is_file()
        assert [p.name for p in wine.menu_dir().iterdir()] == ["Uninstall DDP Studio.lnk"]  # the app's own are gone
        assert not list((wine.user / "Desktop").glob("*.lnk"))
        blocked = (root / "uninstall-blocked.txt").read_text(encoding="utf-8", errors="replace")
        assert "Still in use: env" in blocked
        assert "python.exe (process " in blocked and "Uninstall.exe" not in blocked, blocked
        # Wine's Restart Manager names nobody (a stub), so the programs running from the folder did.
        assert "Named by: programs running from the install folder" in blocked, blocked
    finally:
        release.touch()
        holder.wait(timeout=60)
    proc = wine.run(str(root / "Uninstall.exe"), "/S", "_?=" + here)
    assert proc.returncode == 0
    assert wine.reg_query() is None and not wine.menu_dir().exists()
    assert sorted(p.name for p in root.iterdir()) == ["Uninstall.exe"]  # in place (_?=) it cannot delete itself


@pytest.fixture(scope="module")
def rm_standin(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rm") / "rstrtmgr.dll"
    subprocess.run([MINGW, "-shared", "-municode", "-O2", "-Wall", "-Werror", "-o", str(out), str(RM_STANDIN_SOURCE)],
                   check=True, timeout=120)
    return out


def test_uninstall_names_a_holder_outside_the_folder_through_the_restart_manager(wine, setup_exe, rm_standin):
    """A holder that runs from elsewhere (an editor, Explorer) is named only by the Restart Manager.

    Wine's rstrtmgr.dll answers "no process" to everything, so the uninstaller runs twice against the same 70
    held files: with Wine's (nobody can be named), then with a stand-in DLL that answers as Windows documents it
    (two holders, ERROR_MORE_DATA first): what the uninstaller registers (its first 64 files), how it reads
    RM_PROCESS_INFO, and that it ends the session are what this checks.
    """
    wine.install(setup_exe)
    root, here = wine.install_dir(), win_dir(wine)
    held, release = root / "env" / "checkpoint.pt", wine.prefix / "release-rm"
    release.unlink(missing_ok=True)  # the prefix is the module's
    tools = wine.prefix / "drive_c" / "tools"
    tools.mkdir(exist_ok=True)
    shutil.copy(root / "env" / "Scripts" / "python.exe", tools / "editor.exe")  # the stub, run from outside
    holder = subprocess.Popen(
        ["wine", str(tools / "editor.exe"), "--hold", here + "\\env\\checkpoint.pt", wine.windows(release), "70"],
        env=wine.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    system_dll = wine.prefix / "drive_c" / "windows" / "system32" / "rstrtmgr.dll"
    wines_dll = system_dll.read_bytes()
    try:
        deadline = time.monotonic() + 30
        while not Path(str(held) + ".held").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert Path(str(held) + ".held").exists(), "the holder did not start"

        assert wine.run(str(root / "Uninstall.exe"), "/S", "_?=" + here).returncode == 9
        blocked = (root / "uninstall-blocked.txt").read_text(encoding="utf-8", errors="replace")
        assert "Held by: another program (for example DDP Studio" in blocked, blocked
        assert "Named by: nobody" in blocked, blocked

        system_dll.write_bytes(rm_standin.read_bytes())
        wine.log.unlink()
        proc = wine.run(str(root / "Uninstall.exe"), "/S", "_?=" + here,
                        WINEDLLOVERRIDES=wine.env["WINEDLLOVERRIDES"] + ";rstrtmgr=n",
                        STUB_RM_HOLDERS="Notepad=4242;Windows Explorer=77")
        assert proc.returncode == 9
        blocked = (root / "uninstall-blocked.txt").read_text(encoding="utf-8", errors="replace")
        assert blocked.splitlines()[1:] == ["Held by: Notepad (process 4242), Windows Explorer (process 77)",
                                            "Named by: Restart Manager"], blocked
        assert held.exists() and wine.reg_query() is not None
        calls = wine.calls()
        # What RMDir /r left: the 70 held files, of which the first 64 are asked about.
        assert calls[:2] == ["RmStartSession", "RmRegisterResources session 7: 64 files, 0 apps, 0 services"], calls
        held_names = {f"  {here}\\env\\checkpoint.pt"} | {f"  {here}\\env\\checkpoint.pt.{i}" for i in range(1, 70)}
        assert len(set(calls[2:66])) == 64 and set(calls[2:66]) <= held_names, calls[2:66]
        assert calls[66:] == [
            "RmGetList session 7: room for 0, 2 holders",  # ERROR_MORE_DATA
            "RmGetList session 7: room for 2, 2 holders",
            "RmEndSession session 7",
        ]
    finally:
        system_dll.write_bytes(wines_dll)
        release.touch()
        holder.wait(timeout=60)
        shutil.rmtree(tools, ignore_errors=True)
    assert wine.run(str(root / "Uninstall.exe"), "/S", "_?=" + here).returncode == 0
    assert wine.reg_query() is None


def _version() -> str:
    sys.path.insert(0, str(REPO / "installer"))
    import build

    return build.package_version()
