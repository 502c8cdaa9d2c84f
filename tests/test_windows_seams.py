"""Windows branches exercised on Linux through the platform seam."""

import ctypes

from ddpstudio.core.launch.commands import console_python, dist_args
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.process.proctree import CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, popen_options
from ddpstudio.core.process.winjob import JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, _BasicLimits, _ExtendedLimits
from tests.conftest import killed_after


def test_ranks_get_their_own_group_and_no_console_window_on_windows():
    assert popen_options(WINDOWS) == {"creationflags": CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW}
    assert popen_options(LINUX) == {"start_new_session": True}


def test_job_object_structures_match_the_win64_layout():
    # JOBOBJECT_BASIC_LIMIT_INFORMATION is 64 bytes and the extended one 144 on x64 (winnt.h).
    assert ctypes.sizeof(_BasicLimits) == 64
    assert ctypes.sizeof(_ExtendedLimits) == 144
    assert _ExtendedLimits.BasicLimitInformation.offset == 0
    assert _ExtendedLimits.ProcessMemoryLimit.offset == 112
    assert JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE == 0x2000


def test_pythonw_is_swapped_for_python_on_windows_only():
    exe = r"C:\Users\me\AppData\Local\Programs\DDPStudio\env\Scripts\pythonw.exe"
    expected = r"C:\Users\me\AppData\Local\Programs\DDPStudio\env\Scripts\python.exe"
    assert console_python(exe, WINDOWS, exists=lambda p: p == expected) == expected
    assert console_python(exe, WINDOWS, exists=lambda p: False) == exe
    assert console_python("/usr/bin/python3", LINUX) == "/usr/bin/python3"


def test_dist_args_keep_a_windows_url_with_spaces_as_one_argument():
    plan = Plan(run_id="r", run_dir="d", world_size=4, backend="gloo", device="cuda", store="file",
                init_method="file:///C:/Users/Jürgen Müller/pg")
    args = dist_args("--dist-url {url} --dist-backend {backend} --world-size {world_size} --rank {rank}", plan, 3)
    assert args == ["--dist-url", "file:///C:/Users/Jürgen Müller/pg", "--dist-backend", "gloo",
                    "--world-size", "4", "--rank", "3"]


def test_a_broken_argument_template_is_refused_before_launch(tmp_path):
    from ddpstudio.core.plan import ScriptSpec
    from ddpstudio.core.validate import check_script

    script = tmp_path / "train.py"
    script.write_text("")
    [problem] = check_script(ScriptSpec(path=str(script), dist_args="--dist-url {adress} --rank {rank}"))
    assert problem.field == "dist_args" and "{url}" in problem.message
    assert check_script(ScriptSpec(path=str(script))) == []


def test_restart_manager_structures_match_restartmanager_h():
    from ddpstudio.core.process.restartmgr import FILETIME, RM_PROCESS_INFO, RM_UNIQUE_PROCESS

    # RM_UNIQUE_PROCESS: DWORD + FILETIME = 12 bytes; RM_PROCESS_INFO: 12 + 256 and 64 WCHARs + 4 DWORD-sized = 668.
    assert ctypes.sizeof(FILETIME) == 8 and ctypes.sizeof(RM_UNIQUE_PROCESS) == 12
    assert ctypes.sizeof(RM_PROCESS_INFO) == 668
    assert RM_PROCESS_INFO.strAppName.offset == 12 and RM_PROCESS_INFO.strServiceShortName.offset == 524
    assert RM_PROCESS_INFO.bRestartable.offset == 664


def test_filetime_becomes_the_epoch_seconds_psutil_reports():
    from ddpstudio.core.process.restartmgr import FILETIME, filetime_to_epoch

    ticks = 116444736000000000 + 17_000_000_000 * 10_000_000 + 5_000_000  # 1970 + 17e9 s + 0.5 s
    assert filetime_to_epoch(FILETIME(ticks & 0xFFFFFFFF, ticks >> 32)) == 17_000_000_000.5


def test_lock_holders_ask_the_restart_manager_on_windows(monkeypatch, tmp_path):
    import os

    from ddpstudio.core.process import lockholders, restartmgr

    store = str(tmp_path / "pg")
    asked = []
    monkeypatch.setattr(restartmgr, "holders", lambda paths: asked.append(paths) or [(4242, store), (os.getpid(), store)])
    assert lockholders.holders([store], WINDOWS) == [(4242, store)]  # never ourselves
    assert asked == [[store]]
    monkeypatch.undo()
    assert restartmgr.holders_of(store) == []  # no rstrtmgr.dll here: "nobody known", never a crash
    # Elsewhere psutil looks: a real open handle in a child process is found.
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", f"f = open({store!r}, 'w'); print('open', flush=True); input()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        with killed_after(child, 60, "the child holding the store open"):
            assert child.stdout.readline().strip() == "open"
        assert (child.pid, store) in lockholders.holders([store], LINUX)
    finally:
        child.communicate("\n", timeout=10)


def test_ranks_start_the_real_interpreter_not_the_venv_stub_on_windows():
    from ddpstudio.core.launch.interpreter import VENV_LAUNCHER_ENV, rank_interpreter

    stub = r"C:\Users\me\AppData\Local\Programs\DDPStudio\env\Scripts\python.exe"
    base = r"C:\Users\me\AppData\Roaming\uv\python\cpython-3.11.14-windows-x86_64-none\python.exe"
    got = rank_interpreter(stub, WINDOWS, base_executable=base, in_venv=True, exists=lambda p: p == base)
    assert (got.executable, got.env) == (base, {VENV_LAUNCHER_ENV: stub})
    # The window's pythonw base becomes python.exe; outside a venv, or without the base, nothing changes.
    basew = base.replace("python.exe", "pythonw.exe")
    assert rank_interpreter(stub, WINDOWS, base_executable=basew, in_venv=True, exists=lambda p: p == base).executable == base
    assert rank_interpreter(stub, WINDOWS, base_executable=base, in_venv=False).executable == stub
    assert rank_interpreter(stub, WINDOWS, base_executable=base, in_venv=True, exists=lambda p: False).executable == stub
    assert rank_interpreter("/work/.venv/bin/python", LINUX, base_executable="/usr/bin/python3", in_venv=True).env == {}


def test_a_windows_plan_starts_ranks_with_the_base_interpreter_and_names_the_venv():
    """The variable's meaning is CPython's (getpath, test_getpath.test_venv_win32); the plan must carry it."""
    import sys

    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.launch.interpreter import VENV_LAUNCHER_ENV
    from ddpstudio.core.plan import RecipeSpec
    from ddpstudio.core.policy import Request, build_plan

    assert sys.prefix != sys.base_prefix, "the tests run in the project's venv"
    plan = build_plan(Request(store_path="D:\\pg", recipe=RecipeSpec()), WINDOWS, detect_inventory())
    assert (plan.python, plan.env[VENV_LAUNCHER_ENV]) == (sys._base_executable, sys.executable)
    linux = build_plan(Request(recipe=RecipeSpec()), LINUX, detect_inventory())
    assert linux.python == sys.executable and VENV_LAUNCHER_ENV not in linux.env  # POSIX: no stub


class Kernel32:
    """Records the Win32 calls JobObject makes (the seam for the OS on Linux); every call succeeds."""

    class Function:
        def __init__(self, log, name):
            self.log, self.name, self.argtypes, self.restype = log, name, None, None

        def __call__(self, *args):
            self.log.append((self.name, args))
            return 0x1234 if self.name in ("CreateJobObjectW", "GetCurrentProcess") else 1

    def __init__(self):
        self.log = []

    def __getattr__(self, name):
        fn = self.Function(self.log, name)
        setattr(self, name, fn)
        return fn


def test_every_win32_call_of_the_job_object_is_declared():
    import re
    from pathlib import Path

    from ddpstudio.core.process import winjob

    k32 = Kernel32()
    winjob.declare(k32)
    used = set(re.findall(r"_k32\.(\w+)", Path(winjob.__file__).read_text()))
    undeclared = [name for name in used if getattr(k32, name).restype is None or getattr(k32, name).argtypes is None]
    assert used and not undeclared, undeclared
    assert k32.AssignProcessToJobObject.argtypes == [winjob.HANDLE, winjob.HANDLE]  # 64-bit handles, not int


def test_the_launcher_joins_its_own_job_before_any_rank_exists():
    from ddpstudio.core.process import winjob

    k32 = Kernel32()
    winjob.declare(k32)
    job = winjob.JobObject(k32)
    job.assign_current_process()
    calls = [name for name, _ in k32.log]
    assert calls == ["CreateJobObjectW", "SetInformationJobObject", "GetCurrentProcess", "AssignProcessToJobObject"]
    assert k32.log[-1][1][1] == 0x1234  # the pseudo-handle of this process
