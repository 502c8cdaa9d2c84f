"""The window's Qt-free view-models: bounded series, run metrics, form state, hints, preflight, history."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ddpstudio.core import paths, protocol
from ddpstudio.core.gpu import GpuSample, ProcessSample, Snapshot
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.gui.form_state import SetupState, from_plan
from ddpstudio.core.hints import hints_for, low_load_hint
from ddpstudio.gui.load_history import LoadHistory
from ddpstudio.gui.preflight import SETUP_FILE, prepare_launch, preflight
from ddpstudio.core.metrics.catalog import list_entries
from ddpstudio.gui.run_history import load_run
from ddpstudio.gui.run_metrics import RunMetrics
from ddpstudio.gui.series import Series
from tests.studio import SCRIPTS


class CpuMachine:
    gpu_count = 0
    cuda_available = False


def ev(type_, rank=None, t=None, **data):
    return protocol.make_event(type_, rank=rank, t=t, **data)


def test_series_stays_bounded_and_keeps_the_whole_curve():
    s = Series(capacity=64)
    for i in range(10_000):
        s.append(i, 2.0 * i)
    x, y = s.data()
    assert len(x) <= 65
    assert x[0] < 200 and x[-1] == 9999  # the start is still there, and the end is live
    assert np.all(np.diff(x) > 0)
    assert np.allclose(y, 2 * x)  # averaging keeps a straight line straight
    assert s.stride > 1


def test_series_keeps_gaps_for_missing_values():
    s = Series(capacity=8)
    s.append(0, 1.0)
    s.append(1, None)
    _, y = s.data()
    assert np.isnan(y[1])


def test_run_metrics_follow_the_event_stream_and_estimate_eta():
    m = RunMetrics()
    m.feed(ev(protocol.RUN_STARTED, world_size=2, max_steps=10))
    m.feed(ev(protocol.RANK_STARTED, rank=0, pid=11))
    for step in range(1, 6):
        for rank in (0, 1):
            m.feed(ev(protocol.STEP, rank=rank, step=step, loss=1.0 / step))
        m.feed(ev(protocol.GLOBAL_STEP, t=100.0 + step, step=step, loss=1.0 / step, samples_per_s=50.0,
                  total_steps=10))
    assert set(m.loss) == {0, 1} and len(m.global_loss) == 5 and len(m.samples_per_s) == 5
    assert m.pids == {0: 11}
    assert m.fraction() == pytest.approx(0.5)
    assert m.eta_s(now=105.0) == pytest.approx(5.0)
    m.feed(ev(protocol.RUN_FINISHED, state="finished"))
    assert m.state == "finished" and m.eta_s() is None
    m.feed(ev("not_a_type_we_know"))  # ignored


def test_scraped_losses_drive_progress_for_scripts():
    m = RunMetrics()
    m.feed(ev(protocol.STEP, rank=0, step=3, loss=0.5, source="scraped"))
    assert m.step == 3 and len(m.loss[0]) == 1


def test_load_history_maps_pids_to_ranks_and_gpus_by_index():
    h = LoadHistory()
    h.watch({0: 100, 1: 101})
    gpu = GpuSample(0, "A", 30.0, 2048.0, 8192.0, None, None)
    h.add(Snapshot(10.0, "gpu", gpus=(gpu,), processes=(ProcessSample(100, 90.0, 512.0),
                                                       ProcessSample(999, 5.0, 1.0))))
    h.add(Snapshot(11.0, "gpu", gpus=(gpu,)))
    assert set(h.cpu_pct) == {0} and h.rank_load() == {}
    assert h.gpu_mem_gb[0].last == (1.0, 2.0)
    assert h.mean_gpu_util() == pytest.approx(30.0)


def test_setup_state_round_trips_and_tolerates_bad_settings():
    state = SetupState(workload="script-args", script_path="t.py", script_args="--lr 0.1 'a b'", port=0)
    assert SetupState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    odd = SetupState.from_dict({"batch_size": "many", "lr": 1, "scale_lr": 1, "unknown": 3, "epochs": True})
    assert odd.batch_size == 32 and odd.lr == 1.0 and odd.scale_lr is False and odd.epochs == 1
    request = state.to_request()
    assert request.script.args == ["--lr", "0.1", "a b"] and request.recipe is None and request.store == "auto"


def test_setup_state_maps_store_choices_to_the_request():
    fixed = SetupState(store="fixed", store_path=" /tmp/pg ", port=1234).to_request()
    assert (fixed.store, fixed.store_path, fixed.port) == ("file", "/tmp/pg", None)
    tcp = SetupState(store="tcp", store_path="/tmp/pg", port=0).to_request()
    assert (tcp.store, tcp.store_path, tcp.port) == ("tcp", None, None)


def test_preflight_names_the_field_of_each_problem(tmp_path):
    missing = preflight(SetupState(workload="script-args", script_path=str(tmp_path / "nope.py")), CpuMachine(), LINUX)
    assert [p.field for p in missing.problems] == ["script"] and missing.plan is None
    quotes = preflight(SetupState(workload="script-args", script_args="'unclosed"), CpuMachine(), LINUX)
    assert quotes.problems[0].field == "script_args"
    nccl = preflight(SetupState(backend="nccl"), CpuMachine(), WINDOWS)
    assert nccl.problems[0].field == "backend" and "Windows" in nccl.problems[0].message
    good = preflight(SetupState(batch_size=8), CpuMachine(), LINUX)
    assert good.ok and good.plan.world_size == 2 and good.plan.effective_batch == 16


def test_prepare_launch_writes_the_run_folder_and_the_form(tmp_path):
    ready = prepare_launch(SetupState(batch_size=8, max_steps=3), CpuMachine(), LINUX)
    plan = ready.preflight.plan
    run_dir = paths.runs_dir() / plan.run_id
    assert (run_dir / "plan.json").is_file()
    assert json.loads((run_dir / SETUP_FILE).read_text())["max_steps"] == 3


def test_hints_recognise_the_known_failures():
    keys = lambda text: [h.key for h in hints_for(text)]  # noqa: E731
    assert keys("RuntimeError: use_libuv was requested but PyTorch was build without libuv support") == ["libuv"]
    assert keys("rendezvous stalled: ...; the store file /x existed before this run started") == ["stale_store"]
    assert keys("Gloo connectFullMesh failed with ... Connection refused") == ["stale_store"]
    assert keys("The server socket has failed to listen on any local network address. "
                "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use") == ["busy_port"]
    assert keys("[enforce fail at ..] error 10049: The requested address is not valid in its context.") == \
        ["network_adapter"]
    assert keys("ZeroDivisionError: division by zero") == []
    assert keys("train.py: error: unrecognized arguments: --dist-url file:///s --dist-backend gloo") == ["dist_args"]
    assert keys("train.py: error: unrecognized arguments: --rank 1") == ["dist_args"]
    assert keys("ValueError: Some specified arguments are not used by the HfArgumentParser: ['--dist-url', "
                "'file:///s']") == ["dist_args"]
    assert keys("train.py: error: unrecognized arguments: --epochs 3") == []  # the user's own typo: not ours
    # multiprocessing/spawn.py's words, wrapped as it wraps them (a worker started while the script was imported)
    assert keys("RuntimeError: \n        An attempt has been made to start a new process before the\n        current "
                "process has finished its bootstrapping phase.\n") == ["main_guard"]
    # torch.compile without its toolchain (PyTorch for Windows ships neither Triton nor a C++ compiler): the
    # pinned torch's own words (torch/_inductor/exc.py, read rather than imported: importing inductor costs
    # seconds), as a rank prints them.
    import torch

    inductor = Path(torch.__file__).parent / "_inductor"
    for words, where in (("Cannot find a working triton installation. ", "exc.py"),
                         ("No working C++ compiler found in ", "exc.py"),
                         ('raise RuntimeError(f"Compiler: {compiler} is not found.")', "cpp_builder.py")):
        assert words in (inductor / where).read_text(encoding="utf-8"), (words, where)
    assert keys("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\nTritonMissing: Cannot find a "
                "working triton installation. Either the package is not installed or it is too old.") == \
        ["compile_toolchain"]
    assert keys("InvalidCxxCompiler: No working C++ compiler found in torch._inductor.config.cpp.cxx: (None, "
                "'cl')") == ["compile_toolchain"]
    assert keys("RuntimeError: Compiler: cl is not found.") == ["compile_toolchain"]
    # A prompt read by a rank, whose stdin is empty: CPython's own words.
    import subprocess
    import sys

    asked = subprocess.run([sys.executable, "-c", "input('Press Enter to start training')"], capture_output=True,
                           text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert asked.returncode == 1 and keys(asked.stderr.strip().splitlines()[-1]) == ["stdin_input"], asked.stderr
    # A script that puts its work on a CUDA GPU where PyTorch finds none (nanoGPT's DDP path always does): the
    # pinned torch's own words, from a real process (a GPU machine's GPUs are hidden from this test); and a
    # CPU-only build's (torch/cuda/__init__.py, read: the pinned build here has CUDA).
    on_gpu = subprocess.run([sys.executable, "-c", "import torch; torch.zeros(1).cuda()"], capture_output=True,
                            text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert on_gpu.returncode == 1 and keys(on_gpu.stderr.strip().splitlines()[-1]) == ["no_cuda_device"], \
        on_gpu.stderr
    assert 'raise AssertionError("Torch not compiled with CUDA enabled")' in (
        Path(torch.__file__).parent / "cuda" / "__init__.py").read_text(encoding="utf-8")
    assert keys("AssertionError: Torch not compiled with CUDA enabled") == ["cpu_torch"]
    # Lightning 2.6's own words when its Trainer's devices are not the ranks torchrun (or DDP Studio) started.
    assert keys("ValueError: You set `devices=2` and `num_nodes=1` in Lightning, but the product (2 * 1) does not "
                "match the world size (4).") == ["lightning_devices"]
    # Ignite checks for CUDA before any process group exists, out of the rank helper's NCCL swap: its own words
    import ignite.distributed.comp_models.native as ignite_native

    assert 'raise RuntimeError("Nccl backend is required but no cuda capable devices")' in \
        Path(ignite_native.__file__).read_text(encoding="utf-8")
    assert keys("RuntimeError: Nccl backend is required but no cuda capable devices") == ["library_nccl"]
    # Accelerate (a Transformers Trainer with --ddp_backend nccl on the CPU) refuses it before any process group:
    # the library's hint alone, not the Windows/helper one (helper trial 2026-12-08: that one said "auto does")
    assert keys("ValueError: Your assigned backend nccl is not available, please use gloo") == ["library_nccl"]
    # DistributedDataParallel(model, device_ids=[local_rank]) with the model on the CPU (nanoGPT patched to the
    # CPU, helper trial 2026-12-08): torch's own message, with the set of the module's devices as Python shows it
    import torch.nn.parallel.distributed as ddp_source

    assert '"only work with single-device/multiple-device GPU modules or CPU modules, "' in \
        Path(ddp_source.__file__).read_text(encoding="utf-8")
    devices = {torch.device("cpu")}
    cpu_ddp = ("ValueError: DistributedDataParallel device_ids and output_device arguments only work with "
               "single-device/multiple-device GPU modules or CPU modules, but got device_ids [0], output_device "
               f"None, and module parameters {devices}.")
    assert keys(cpu_ddp) == ["cpu_device_ids"]
    assert keys(cpu_ddp.replace(str(devices), str({torch.device("cuda", 0), torch.device("cuda", 1)}))) == []
    assert low_load_hint(20.0, None).key == "low_gpu_load"
    assert low_load_hint(90.0, 0.5).key == "data_wait"
    assert low_load_hint(90.0, 0.01) is None and low_load_hint(None, None) is None


def test_each_front_names_its_own_controls_in_every_hint():
    """The window's hints name its buttons and fields; the CLI's the commands and options that do the same."""
    from ddpstudio.core.hints import _RULES, CLI, WINDOW

    every = "\n".join(words[0] for _, words in _RULES)  # one failure's words per rule: every rule matches
    window, cli = hints_for(every, front=WINDOW), hints_for(every, front=CLI)
    assert [h.key for h in window] == [h.key for h in cli] and len(cli) == len(_RULES) - 4  # four are left out:
    # a stale store's rendezvous hint, both port hints where the run's own port was taken by the run's own
    # processes, and the NCCL-swap hint where the script's library refused NCCL itself (their more specific
    # hints show)
    for w, c in zip(window, cli):
        assert "{" not in w.text + c.text and w.title == c.title, (w, c)
        assert not any(word in c.text for word in ("Click", "click", "the Python field", "Leave the port empty",
                                                   "leave Python empty")), c
    by_key = {h.key: h.text for h in cli}
    assert "Run ddpstudio clean to remove it" in by_key["stale_store"]
    assert "ddpstudio clean lists what killed runs left behind" in hints_for(
        "port 12355 is already in use, held by python (pid 7)", front=CLI)[0].text
    assert "(--python) needs one too" in by_key["cpu_torch"] and "or leave out --python." in by_key["cpu_torch"]
    assert "Leave out --port to pick a free one, or run ddpstudio clean" in \
        hints_for("EADDRINUSE", front=CLI)[0].text
    assert "Click Clean up to remove it" in {h.key: h.text for h in window}["stale_store"]
    assert by_key["copies_start_ranks"].endswith("let it start its ranks: run it with --script-style spawn.")
    assert {h.key: h.text for h in window}["copies_start_ranks"].endswith(
        'let it start its ranks: choose the kind "My script: starts its own ranks".')


def test_past_runs_are_listed_and_reloaded(tmp_path):
    ready = prepare_launch(SetupState(batch_size=8, max_steps=2), CpuMachine(), LINUX)
    plan = ready.preflight.plan
    run_dir = paths.runs_dir() / plan.run_id
    lines = [ev(protocol.RUN_STARTED, max_steps=2), ev(protocol.STEP, rank=0, step=1, loss=2.0),
             ev(protocol.STEP, rank=1, step=1, loss=2.2), ev(protocol.GLOBAL_STEP, step=1, loss=2.1),
             ev(protocol.LOG, rank=1, stream="stderr", line="warning: something"),
             ev(protocol.RUN_FINISHED, state="failed", summary="rank 1 failed first")]
    (run_dir / "events.jsonl").write_text("".join(e.to_line() + "\n" for e in lines) + "{broken\n")
    (run_dir / "result.json").write_text(json.dumps({"state": "failed", "duration_s": 3.5}))
    (paths.runs_dir() / "not-a-run").mkdir()
    runs = list_entries()
    assert [r.run_id for r in runs] == [plan.run_id] and runs[0].state == "failed"
    loaded = load_run(run_dir)
    assert set(loaded.metrics.loss) == {0, 1} and loaded.metrics.state == "failed"
    assert loaded.logs == [(1, "stderr", "warning: something")]
    assert loaded.setup.max_steps == 2 and loaded.setup.batch_size == 8


def test_run_again_from_a_cli_plan_without_a_saved_form():
    # A real script: the interpreter itself is a binary, which validation refuses as a script (issue 27).
    plan = preflight(SetupState(workload="script-env", script_path=str(SCRIPTS / "env_style.py"),
                                script_args="-c pass",
                                store="tcp"), CpuMachine(), LINUX).plan
    state = from_plan(plan)
    # Issue 24: ranks left to "auto" (2 on this CPU machine) stay auto on "run again"; a fixed number stays fixed.
    assert (state.workload, state.script_args, state.store, state.world_size) == ("script-env", "-c pass", "tcp", 0)
    fixed = preflight(SetupState(workload="script-env", script_path=str(SCRIPTS / "env_style.py"),
                                 script_args="-c pass", store="tcp", world_size=2), CpuMachine(), LINUX).plan
    assert from_plan(fixed).world_size == 2 and "world_size" not in fixed.auto
