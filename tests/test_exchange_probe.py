"""The Gloo-on-CUDA probe: real children that answer, crash, hang or lie; the parent classifies and carries on."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from ddpstudio.core.exchange import probe
from ddpstudio.core.exchange.probe import MARKER, Outcome
from ddpstudio.core.exchange.probekey import current_key
from ddpstudio.core.gpu import FakeGpuSource, set_source
from ddpstudio.core.platform import LINUX
from tests import machine


def child(body: str) -> list[str]:
    """A child command: Python running ``body`` with ``say(**event)`` for the probe's lines (store path in argv[1])."""
    prelude = f"import json, os, sys, time\ndef say(**e): print({MARKER!r} + json.dumps(e), flush=True)\n"
    return [sys.executable, "-c", prelude + body]


ONE_GPU = 'say(event="cuda", available=True, count=1)\nsay(event="start", gpu=0, name="RTX Test")\n'
RIGHT = 'say(event="done", gpu=0, ok=True, value=[1.0], expected=[1.0])\n'


def run(body: str, timeout_s: float = 60.0):
    return probe.run(child(body), timeout_s=timeout_s, platform=LINUX)


@pytest.mark.slow
@pytest.mark.real_gpus
def test_the_real_probe_answers_for_this_machine_quickly_and_caches_it(studio_home):
    """Every GPU torch sees all-reduces correctly through Gloo (Linux builds of Gloo take CUDA tensors);
    without one the probe says "not applicable"."""
    gpus = machine.torch_gpus()
    assert probe.cached_outcome() is None
    started = time.monotonic()
    result = probe.probe()
    took = time.monotonic() - started
    expected = Outcome.NATIVE if gpus else Outcome.NOT_APPLICABLE
    assert result.outcome is expected, result
    assert result.detail == (f"all-reduce correct on {len(gpus)} GPU(s)" if gpus else "torch sees no CUDA GPU")
    assert [(g.name, g.outcome) for g in result.gpus] == [(name, Outcome.NATIVE) for name in gpus]
    assert result.exit == "exit code 0"
    assert took < 60, f"the probe took {took:.1f} s"
    assert probe.cached_outcome() == str(expected)
    stored = json.loads(probe.cache_path().read_text(encoding="utf-8"))
    assert stored["outcome"] == str(expected) and stored["key"] == current_key().to_dict()
    assert probe.cache_path().is_relative_to(studio_home)
    again = time.monotonic()
    assert probe.probe() == result  # from the cache: no child this time
    assert time.monotonic() - again < 2
    probe.invalidate()
    assert probe.cached_outcome() is None


def test_a_child_that_aborts_is_classified_crashes_and_the_parent_carries_on():
    result = run(ONE_GPU + "os.abort()\n")
    assert result.outcome is Outcome.CRASHES and not result.safe
    assert result.exit == "killed by SIGABRT"
    assert result.gpus[0].outcome is Outcome.CRASHES and result.gpus[0].name == "RTX Test"
    assert result.detail == "the probe process killed by SIGABRT while all-reducing on GPU 0 (RTX Test)"
    assert "(pytorch #186535)" in result.sentence() and "crashed" in result.sentence()


def test_a_child_that_segfaults_names_the_signal_and_the_gpu_it_was_on():
    body = ('say(event="cuda", available=True, count=2)\nsay(event="start", gpu=0, name="A")\n'
            'say(event="done", gpu=0, ok=True, value=[1.0], expected=[1.0])\nsay(event="start", gpu=1, name="B")\n'
            "import ctypes; ctypes.string_at(0)\n")
    result = run(body)
    assert result.outcome is Outcome.CRASHES
    assert result.exit == "killed by SIGSEGV"
    assert [(g.index, g.outcome) for g in result.gpus] == [(0, Outcome.NATIVE), (1, Outcome.CRASHES)]
    assert result.gpus[1].detail == "killed by SIGSEGV"


def test_a_hung_child_is_cut_off_after_the_timeout_with_nothing_left_running():
    started = time.monotonic()
    result = run(ONE_GPU + "time.sleep(120)\n", timeout_s=1.5)
    assert time.monotonic() - started < 20
    assert result.outcome is Outcome.CRASHES and result.hung
    assert result.exit == "hung after 1.5 s"
    assert result.detail.startswith("the probe process hung after 1.5 s while all-reducing on GPU 0")
    assert "Gloo hung all-reducing" in result.sentence()
    # the studio_home fixture fails the test if the child survived


def test_a_wrong_sum_is_classified_wrong():
    result = run(ONE_GPU + 'say(event="done", gpu=0, ok=False, value=[2.0], expected=[1.0])\n')
    assert result.outcome is Outcome.WRONG
    assert result.detail == "the all-reduce gave wrong numbers on GPU 0: expected [1.0], got [2.0]"
    assert "gave wrong sums" in result.sentence()


def test_a_python_error_in_the_all_reduce_is_not_native():
    result = run(ONE_GPU + 'say(event="error", gpu=0, message="RuntimeError: no kCUDA creator")\n')
    assert result.outcome is Outcome.CRASHES
    assert result.detail == "the all-reduce failed on GPU 0: RuntimeError: no kCUDA creator"


def test_correct_sums_on_every_gpu_are_native():
    result = run(ONE_GPU + RIGHT)
    assert result.outcome is Outcome.NATIVE and result.safe
    assert result.detail == "all-reduce correct on 1 GPU(s)"


def test_a_child_that_stops_early_without_an_error_is_not_native():
    result = run('say(event="cuda", available=True, count=2)\nsay(event="start", gpu=0, name="A")\n' + RIGHT)
    assert result.outcome is Outcome.CRASHES
    assert result.detail == "the probe stopped after 1 of 2 GPUs"


def test_a_child_that_cannot_start_torch_says_so():
    result = run('print("ImportError: DLL load failed while importing _C", file=sys.stderr)\nsys.exit(1)\n')
    assert result.outcome is Outcome.CRASHES
    assert result.detail == ("the probe process ended with exit code 1; "
                             "last output: ImportError: DLL load failed while importing _C")


def test_the_probe_child_leaves_no_store_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    result = run(ONE_GPU + "open(sys.argv[1], 'w').write('x')\n" + RIGHT)
    assert result.outcome is Outcome.NATIVE
    assert list(tmp_path.iterdir()) == []


def test_a_changed_gpu_set_or_driver_means_never_probed():
    set_source(FakeGpuSource([{"name": "RTX A", "total_memory_mb": 8000, "uuid": "GPU-a"}], driver_version="555.85"))
    try:
        result = run(ONE_GPU + RIGHT)
        probe.store(result)
        assert probe.cached_outcome() == "native"
        set_source(FakeGpuSource([{"name": "RTX A", "total_memory_mb": 8000, "uuid": "GPU-a"}],
                                 driver_version="560.10"))
        assert probe.cached_outcome() is None
        set_source(FakeGpuSource([{"name": "RTX A", "total_memory_mb": 8000, "uuid": "GPU-a"},
                                  {"name": "RTX A", "total_memory_mb": 8000, "uuid": "GPU-b"}]))
        assert probe.cached_outcome() is None
        set_source(FakeGpuSource([{"name": "RTX A", "total_memory_mb": 8000, "uuid": "GPU-a"}]))
        assert probe.cached_outcome() == "native"
    finally:
        set_source(None)


def test_the_command_line_probe_uses_the_child_seam_and_caches(studio_home, monkeypatch):
    monkeypatch.setenv(probe.CHILD_ENV, json.dumps(child(ONE_GPU + "os.abort()\n")))
    out = subprocess.run([sys.executable, "-m", "ddpstudio.core.exchange.probe"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith(MARKER))
    data = json.loads(line[len(MARKER):])
    assert data["outcome"] == "crashes" and data["exit"] == "killed by SIGABRT"
    assert probe.cached_outcome() == "crashes"


@pytest.mark.parametrize("call", ["cached_outcome()", "invalidate()"])
def test_reading_the_cache_imports_no_torch(call):
    code = (f"import sys; from ddpstudio.core.exchange import probe; probe.{call}; "
            "print(','.join(m for m in ('torch', 'PySide6') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""


@pytest.mark.slow
def test_the_real_child_runs_its_gloo_group_and_all_reduce_on_the_cpu_device_seam(monkeypatch):
    """probe_child's own code past the CUDA check (FileStore, one-rank Gloo group, all-reduce, comparison),
    on a CPU tensor: the one stand-in is the device."""
    from ddpstudio.core.exchange.probe_child import DEVICE_ENV

    monkeypatch.setenv(DEVICE_ENV, "cpu")
    result = probe.run(platform=LINUX, timeout_s=120)
    assert result.outcome is Outcome.NATIVE, result
    assert [(g.index, g.name, g.outcome) for g in result.gpus] == [(0, "cpu", Outcome.NATIVE)]
    assert result.exit == "exit code 0"
