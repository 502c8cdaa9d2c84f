"""The Wine tier's harness: DDP Studio run by Windows CPython and Windows PyTorch under Wine.

The runtime comes from ``scripts/wine-env.sh`` (built once and cached; DDP Studio copied from this
checkout each session). One private Wine prefix per session with a persistent wineserver (a Windows
process then starts in 0.4 s, not 4 s); each test gets its own DDP Studio home on drive C:. Every
program is started with pipes as its standard handles: Wine 8 cannot hand CPython a regular file as
one (``scripts/wine_env.py`` WORKAROUNDS).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path, PureWindowsPath

import psutil

from tests.winerun import WindowsRun

REPO = Path(__file__).resolve().parents[1]


def missing() -> str | None:
    """Why the tier cannot run here, or None."""
    if sys.platform != "linux":
        return "runs Windows CPython and PyTorch under Wine on Linux"
    absent = sorted({"wine64" for tool in ("wine", "wineserver") if not shutil.which(tool)})
    if absent:
        return "needs Debian's wine64 (bash scripts/dev-env.sh --test installs it as root)"
    return None


def build_runtime(into: Path | None = None) -> Path:
    """``scripts/wine-env.sh [--into INTO]``: the cached Windows runtime (built when missing), or INTO made
    that runtime plus this checkout's DDP Studio."""
    proc = subprocess.run(["bash", str(REPO / "scripts" / "wine-env.sh"), *(["--into", str(into)] if into else [])],
                          env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=1500)
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/wine-env.sh failed:\n{proc.stdout}{proc.stderr}")
    print(proc.stderr.strip())
    return Path(proc.stdout.strip())


def wine_env(prefix: Path, home: Path) -> dict[str, str]:
    """The environment ``scripts/wine_env.py`` defines (prefix, HOME, the workarounds' variables)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import wine_env
    finally:
        sys.path.pop(0)
    return wine_env.wine_env(prefix, home)


def first_server_of(prefix: Path, env: dict[str, str]) -> None:
    """Make the empty ``prefix`` folder and wait until no wineserver answers for it, before its first program.

    A server is found by the prefix folder's device and inode (dlls/ntdll/unix/server.c
    ``setup_config_dir``: ``server_dir = init_server_dir( st.st_dev, st.st_ino )``). A new prefix that got
    the inode of one deleted a moment ago (another test module's) reaches that prefix's dying server, and
    wineboot exits with "could not load kernel32.dll" (seen twice in CI-like runs). Such a server serves a
    folder that is gone, so it is ended (``-k``) and waited for (``-w``); both return at once when no server
    is there."""
    prefix.mkdir(parents=True, exist_ok=True)
    for option in ("-k", "-w"):
        subprocess.run(["wineserver", option], env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)


class WindowsBox:
    """A Wine prefix with the Windows runtime: runs its python.exe, maps paths, finds its processes."""

    def __init__(self, base: Path, runtime: Path) -> None:
        self.base, self.runtime = base, runtime
        self.prefix = base / "prefix"
        (base / "home").mkdir(parents=True, exist_ok=True)
        self.env = wine_env(self.prefix, base / "home")
        self.python_exe = self.windows(runtime / "python.exe")

    def boot(self) -> None:
        # Persistent: the server stays between programs. It forks into the background and keeps its
        # standard handles, so they are not pipes we would wait on.
        first_server_of(self.prefix, self.env)
        subprocess.run(["wineserver", "-p"], env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60, check=True)
        # Into a file: the services wineboot starts keep its standard handles open as long as the server lives.
        with open(self.base / "wineboot.log", "wb") as log:
            subprocess.run(["wine", "wineboot", "-i"], env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                           stderr=log, timeout=300, check=True)

    def shut_down(self) -> None:
        """Ends the prefix's programs and its server, and waits until the server is gone (``-w``). A server is
        found by the prefix folder's device and inode (dlls/ntdll/unix/server.c ``setup_config_dir``:
        ``server_dir = init_server_dir( st.st_dev, st.st_ino )``), so a later prefix that reuses the inode
        would reach this dying server: wineboot then exits 53, "could not load kernel32.dll" (seen once)."""
        subprocess.run(["wineserver", "-k"], env=self.env, capture_output=True, timeout=60)
        subprocess.run(["wineserver", "-w"], env=self.env, capture_output=True, timeout=60)

    # -- paths -----------------------------------------------------------------------------------
    @staticmethod
    def windows(path: Path) -> str:
        """A Linux path as Wine's Z: drive shows it."""
        return "Z:" + str(path).replace("/", "\\")

    def unix(self, path: str) -> Path:
        """Where a C:\\ path of this prefix lies on Linux."""
        win = PureWindowsPath(path)
        assert win.drive.upper() == "C:", path
        return self.prefix / "drive_c" / Path(*win.parts[1:])

    # -- programs --------------------------------------------------------------------------------
    def popen(self, *args: str, home: str, **env: str) -> subprocess.Popen:
        """``python.exe ARGS`` with DDPSTUDIO_HOME=``home``; stdin, stdout and stderr are pipes."""
        return subprocess.Popen(["wine", str(self.runtime / "python.exe"), *args],
                                env={**self.env, "DDPSTUDIO_HOME": home, **env}, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                errors="replace")

    def ddpstudio(self, *args: str, home: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
        proc = self.popen("-m", "ddpstudio", *args, home=home, **env)
        try:
            out, err = proc.communicate("", timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"ddpstudio {' '.join(args)} ran past {timeout} s:\n{out}\n{err}") from None
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def start(self, *args: str, home: str, **env: str) -> WindowsRun:
        """``python.exe -m ddpstudio ARGS`` running, its events read as they arrive (``--json`` runs)."""
        proc = self.popen("-m", "ddpstudio", *args, home=home, **env)
        assert proc.stdin is not None
        proc.stdin.close()  # a pipe it was given, now at its end: nothing reads it
        return WindowsRun(proc)

    @staticmethod
    def interrupt(run: WindowsRun) -> None:
        """Ctrl+C, as a console delivers it to a Windows program: Wine's SIGINT handler starts the
        program's console control routine with CTRL_C_EVENT (dlls/ntdll/unix/signal_x86_64.c
        ``int_handler``: ``NtCreateThreadEx(... p__wine_ctrl_routine, 0 /* CTRL_C_EVENT */ ...)``), which
        runs the handlers the program set with SetConsoleCtrlHandler (CPython's SIGINT handling)."""
        os.kill(run.proc.pid, signal.SIGINT)  # ``wine`` execs the program: its pid is the program's

    def terminate_process(self, pid: int, home: str) -> None:
        """TerminateProcess(pid, 1), as Task Manager's End task does: no warning, no clean-up."""
        code = ("import ctypes, sys; k = ctypes.WinDLL('kernel32', use_last_error=True); "
                "k.OpenProcess.restype = ctypes.c_void_p; h = k.OpenProcess(1, False, int(sys.argv[1])); "
                "sys.exit(0 if h and k.TerminateProcess(ctypes.c_void_p(h), 1) else ctypes.get_last_error())")
        proc = self.popen("-c", code, str(pid), home=home)
        out, err = proc.communicate("", timeout=60)
        assert proc.returncode == 0, f"TerminateProcess({pid}) failed: error {proc.returncode} {out}{err}"

    def write(self, path: str, text: str) -> None:
        """A file at a C:\\ path of this prefix, written from Linux."""
        target = self.unix(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    # -- processes -------------------------------------------------------------------------------
    def processes(self) -> list[psutil.Process]:
        """Linux processes that are Windows programs started from this runtime (not Wine's own services)."""
        marker = self.windows(self.runtime).lower()
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                line = " ".join(proc.info["cmdline"] or []).lower()
            except psutil.Error:
                continue
            if marker in line:
                found.append(proc)
        return found

    def assert_none_left(self, within_s: float = 10) -> None:
        """None of this runtime's processes is running (waits up to ``within_s``); ends any that are."""
        deadline = time.monotonic() + within_s
        left = self.processes()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        described = []
        for proc in left:
            try:
                described.append(f"{proc.pid} {' '.join(proc.cmdline()[:6])}")
                proc.kill()
            except psutil.Error:
                pass
        assert not described, f"Windows processes left running: {described}"


def report(stdout: str) -> dict:
    return json.loads(stdout)
