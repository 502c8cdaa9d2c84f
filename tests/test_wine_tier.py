"""The Wine tier: DDP Studio run by Windows CPython 3.11 and PyTorch 2.14.1's Windows build, under Wine.

Each test is a real Windows process tree: the command line, the launcher, the ranks, Job Objects,
drive-letter paths. The runtime is built by ``scripts/wine-env.sh`` (cached in ~/.cache/ddpstudio-wine;
the first session downloads and builds it, about 2.5 minutes). What Wine 8 lacks and how the runtime
works around it: ``scripts/wine_env.py`` WORKAROUNDS and docs/windows.md.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import PureWindowsPath

import psutil
import pytest

from ddpstudio.core.platform import WINDOWS
from ddpstudio.core.process.exitcodes import describe_exit
from tests.wine import WindowsBox, build_runtime, missing, report
from tests.winerun import WindowsRun

pytestmark = [
    pytest.mark.wine,
    pytest.mark.slow,
    pytest.mark.posix_only("runs the Windows build under Wine on Linux"),
    pytest.mark.timeout(400),  # under faulthandler_timeout (pyproject.toml), which ends the whole run
    pytest.mark.skipif(missing() is not None, reason=missing() or ""),
]


@pytest.fixture(scope="module")
def box(tmp_path_factory) -> WindowsBox:
    base = tmp_path_factory.mktemp("wine-tier")
    windows = WindowsBox(base, build_runtime(base / "runtime"))
    try:
        windows.boot()
        yield windows
    finally:
        windows.shut_down()


@pytest.fixture
def none_left(box) -> None:
    """Afterwards no Windows process of the runtime is left."""
    yield
    box.assert_none_left()


@pytest.fixture
def home(none_left, request) -> str:
    """This test's DDP Studio home on drive C:."""
    return "C:\\studio\\" + request.node.name[:40]


def test_doctor_says_windows_and_survives_processes_it_cannot_read(box, home):
    proc = box.ddpstudio("doctor", "--json", home=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = report(proc.stdout)
    assert facts["platform"] == "Windows"
    assert facts["python"].startswith("3.11.")
    assert facts["inventory"]["torch_version"] == "2.14.1+cpu"
    assert facts["choice"]["backend"] == "gloo"
    assert facts["choice"]["store"] == "file" and "libuv" in facts["choice"]["store_reason"]
    assert "built without libuv" in facts["libuv"]
    assert facts["network"]["loopback_interface"]
    # The process scan ran over Wine's own processes, whose executable psutil cannot read here.
    assert facts["leftovers"]["orphans"] == [] and facts["leftovers"]["stale_stores"] == []
    # A CPU-only torch cannot use CUDA: answered without a probe child (a second torch import).
    probe = facts["gloo_cuda_all_reduce"]
    assert probe["outcome"] == "not applicable" and probe["exit"] == "not started: nothing to check", probe
    assert "CPU-only build" in probe["detail"]


def test_a_port_owner_psutil_cannot_name_is_named_by_its_command_line(box, home):
    """psutil's Windows ``name()`` raises a bare OSError (WinError 87) for every process under Wine 8.
    Wine's TCP table names no owner (pid 0); Windows names the listener, here this very process, so
    ``_listeners`` says what Windows would. The rest is real: psutil reading a Windows process."""
    code = ("import json, os, socket\n"
            "from ddpstudio.core.rendezvous import ports\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); port = s.getsockname()[1]\n"
            "ports._listeners = lambda: [(os.getpid(), port)]\n"
            "print(json.dumps({'pid': os.getpid(), 'owner': ports.port_owner(port)}))\n")
    proc = box.popen("-c", code, home=home)
    out, err = proc.communicate("", timeout=120)
    assert proc.returncode == 0, out + err
    found = json.loads(out)
    assert found["owner"]["pid"] == found["pid"]
    assert found["owner"]["name"] == "python.exe"
    assert found["owner"]["cmdline"][1] == "-c"


def result_of(box: WindowsBox, run: WindowsRun) -> dict:
    """The run's result.json, read from drive C: on Linux."""
    run_dir = run.wait_for("run_started", 0).get("run_dir")
    return json.loads((box.unix(run_dir) / "result.json").read_text(encoding="utf-8"))


def processes_left(box: WindowsBox, within_s: float) -> list[str]:
    """The command lines of the runtime's processes still running after up to ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        left = []
        for proc in box.processes():
            try:
                left.append(" ".join(proc.cmdline()))
            except psutil.Error:  # gone while looked at
                continue
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


DEMO_HOME = "C:\\studio\\demo"
CHECKPOINTS = DEMO_HOME + "\\checkpoints"
# The built-in demo with the least work that still trains, checkpoints and evaluates: the built-in mlp (these
# tests are about the launcher, the store and the ranks, not the model; torchvision's import costs a Windows
# process under Wine as much as torch's), batch 8, synthetic data (0 DataLoader workers).
DEMO = ("run", "--demo", "--model", "mlp", "--batch-size", "8", "--checkpoint-dir", CHECKPOINTS, "--json")


@pytest.fixture(scope="module")
def demo(box) -> WindowsRun:
    """Two ranks, two steps of the demo, finished: read by the demo test and the two-rank test (one run: each
    Windows rank under Wine pays 20-50 s of torch imports), and its checkpoint is what the stop test resumes."""
    run = box.start(*DEMO, "--world-size", "2", "--max-steps", "2", home=DEMO_HOME)
    run.finish(300)
    box.assert_none_left()
    return run


def test_the_demo_trains_checkpoints_and_finishes_through_the_launcher_on_a_drive_letter_store(box, demo):
    assert demo.proc.returncode == 0, demo.explain()
    started = demo.wait_for("run_started", 0)
    store = PureWindowsPath(started.get("store_path"))
    assert started.get("store") == "file" and store.parent == PureWindowsPath(DEMO_HOME, "stores")
    # The documented Windows form: three slashes, then the drive (file:///d:/tmp/some_file).
    assert started.get("init_method") == "file:///" + store.as_posix()
    assert not box.unix(str(store)).exists()  # every rank ended cleanly: the store went with them
    rank = demo.wait_for("rank_started", 0).get("command")
    assert rank[0] == box.python_exe and rank[1:5] == ["-u", "-P", "-m", "ddpstudio.rank.recipe"]
    assert [e.get("step") for e in demo.of_type("step") if e.rank == 0] == [1, 2]
    saved = demo.wait_for("checkpoint_saved", 0)
    assert (saved.get("path"), saved.get("step")) == (CHECKPOINTS + "\\checkpoint.pt", 2)
    assert box.unix(saved.get("path")).is_file()
    assert demo.wait_for("eval", 0).get("samples") > 0
    result = result_of(box, demo)
    assert result["state"] == "finished" and result["exit_codes"] == {"0": 0, "1": 0}, result


def test_two_windows_ranks_train_together_over_gloo_on_a_drive_letter_store(box, demo):
    """Two ranks, two Windows processes: Gloo's libuv transport between them (DDP's gradient all-reduce, the
    evaluation's totals). Under Wine this needs the runtime's own Visual C++ DLLs (scripts/wine_env.py
    NATIVE_DLLS): with Wine's builtin msvcp140 the first all_reduce timed out ('unbound_buffer.cc:65')."""
    assert demo.proc.returncode == 0, demo.explain()
    started = demo.wait_for("run_started", 0)
    assert (started.get("backend"), started.get("store"), started.get("world_size")) == ("gloo", "file", 2)
    assert started.get("init_method").startswith("file:///C:/"), started.get("init_method")
    joined = {e.rank: e.get("group_size") for e in demo.of_type("rank_joined")}
    assert joined == {0: 2, 1: 2}, demo.explain()
    for rank in (0, 1):
        steps = [e for e in demo.of_type("step") if e.rank == rank]
        assert [e.get("step") for e in steps] == [1, 2], demo.explain()
        assert all(math.isfinite(e.get("loss")) for e in steps), demo.explain()
    assert [e.get("step") for e in demo.of_type("global_step")] == [1, 2]
    assert all(math.isfinite(e.get("loss")) for e in demo.of_type("global_step"))
    evaluated = demo.wait_for("eval", 0)  # both ranks' totals, all-reduced
    assert evaluated.get("samples") > 0 and math.isfinite(evaluated.get("loss")), demo.explain()
    result = result_of(box, demo)
    assert result["state"] == "finished" and result["exit_codes"] == {"0": 0, "1": 0}, result
    assert not box.unix(started.get("store_path")).exists()


def test_ctrl_c_stops_a_resumed_demo_and_its_rank_exits_as_ctrl_c_ends_a_windows_program(box, demo, none_left):
    assert demo.proc.returncode == 0, "the demo run this one resumes did not finish"
    # The same home: a user's second run, which finds the model checks of the first in its cache.
    # One rank now: a checkpoint holds the model, not the world size it was saved by. The same recipe without
    # --demo (whose one epoch the mlp ends in seconds): 100 epochs, so it is still training when Ctrl+C comes.
    run = box.start(*[a for a in DEMO if a != "--demo"], "--world-size", "1", "--epochs", "100", "--resume",
                    home=DEMO_HOME)
    first = run.wait_for("step", 300)
    resumed = [e.get("line") for e in run.of_type("log") if "resumed from" in (e.get("line") or "")]
    assert first.get("step") == 3 and CHECKPOINTS + "\\checkpoint.pt" in resumed[0], run.explain()
    box.interrupt(run)  # the CLI's Ctrl+C: 'stop' on the launcher's stdin, as the window's Stop
    asked = time.monotonic()
    assert run.finish(60) == 3, run.explain()  # 3: stopped
    left = processes_left(box, 10 - (time.monotonic() - asked))
    assert left == [], f"{time.monotonic() - asked:.1f} s after Ctrl+C: {left}"
    said = [e.get("line") for e in run.of_type("log") if e.get("stream") == "launcher"]
    assert "stopping: asked to stop" in said, run.explain()
    (exited,) = run.of_type("rank_exited")
    # The stop file's KeyboardInterrupt, ended as Ctrl+C ends a Windows program (rank/stopwatch.py).
    assert describe_exit(exited.get("exit_code"), WINDOWS) == "interrupted by Ctrl+C (0xC000013A)", run.explain()
    result = result_of(box, run)
    assert result["state"] == "stopped" and result["stop_reason"] == "asked to stop", result


# A user's script in the PyTorch examples' style: the distributed settings arrive as arguments.
SCRIPT = """\
import argparse, subprocess, sys, time
import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--worker", action="store_true", help="start a worker process, as DataLoader workers are")
p.add_argument("--dist-url"); p.add_argument("--dist-backend")
p.add_argument("--world-size", type=int); p.add_argument("--rank", type=int)
a = p.parse_args()
dist.init_process_group(a.dist_backend, init_method=a.dist_url, world_size=a.world_size, rank=a.rank)
if a.worker:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 100000):
    loss = model(torch.ones(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    time.sleep(0.2)
"""


def test_a_killed_launcher_takes_its_ranks_along_and_clean_removes_the_store_it_left(box, home):
    script = home + "\\my scripts\\train.py"  # a space: one argument through Windows' command lines
    store = "C:\\pg\\store"  # a fixed path, as in the PyTorch-on-Windows blog (file:///D:\pg)
    box.unix("C:\\pg").mkdir(parents=True, exist_ok=True)  # the user's folder: a fixed path's is never created
    box.write(script, SCRIPT)
    run = box.start("run", "--script", script, "--world-size", "1", "--store-path", store, "--json",
                    "--", "--worker", home=home)
    run.wait_for("step", 300)
    # The rank helper (its sitecustomize first on the rank's PYTHONPATH) watched the script's rank.
    assert run.of_type("rank_watched") and run.wait_for("rank_joined", 0).get("world_size") == 1, run.explain()
    assert any("time.sleep(600)" in line for line in processes_left(box, 0)), "the rank's worker did not start"
    box.terminate_process(run.wait_for("run_started", 0).get("launcher_pid"), home=home)
    killed = time.monotonic()
    left = processes_left(box, 10)
    assert left == [], f"{time.monotonic() - killed:.1f} s after the launcher was killed: {left}"
    assert run.finish(30) == 1
    assert "the launcher ended without reporting a result (exit code 1); 1 of its 1 rank(s) ended with it" \
        in "\n".join(run.stderr), run.explain()
    assert box.unix(store).is_file()  # what a killed run leaves behind

    clean = box.ddpstudio("clean", "--json", "--yes", home=home)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    done = report(clean.stdout)
    (stale,) = done["findings"]["stale_stores"]
    run_id = run.wait_for("run_started", 0).get("run_id")
    assert stale["path"] == store and stale["reason"].startswith(f"left by run {run_id}"), stale
    assert done["report"]["deleted"] == [store] and done["report"]["left"] == [], done["report"]
    assert not box.unix(store).exists()


def test_a_dataloader_worker_that_runs_an_unguarded_script_again_is_the_stated_root_cause(box, home):
    """Windows' own spawn start method (no multiprocessing_context needed there): the worker imports the script
    again, its top level calls init_process_group, and the rank helper refuses it (tests/test_main_guard.py)."""
    from ddpstudio.rank.script_hooks import REIMPORTED_MAIN
    from tests.studio import SCRIPTS

    script = home + "\\no_main_guard.py"
    text = (SCRIPTS / "no_main_guard.py").read_text(encoding="utf-8")
    box.write(script, text.replace(', multiprocessing_context="spawn"', ""))  # as written for Windows
    proc = box.ddpstudio("run", "--json", "--script", script, "--world-size", "1", "--rendezvous-timeout", "120",
                         home=home)
    done = [e for e in map(json.loads, proc.stdout.splitlines()) if e.get("type") == "run_finished"]
    assert proc.returncode == 1 and done, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert done[0]["summary"] == f"rank 0 failed first (exit code 1): {REIMPORTED_MAIN}"
