"""Exit codes in words: real children killed by signals on Linux, Windows NTSTATUS codes through the platform seam,
and the pytorch #186535 note for a native crash in a Gloo run on CUDA."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from ddpstudio.core.exchange import probe
from ddpstudio.core.exchange.crash import gloo_cuda_crash_note
from ddpstudio.core.launch.exitabort import gloo_exit_abort_note
from ddpstudio.core.launch.rootcause import RankFailure
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.process.exitcodes import describe_exit, is_native_crash
from ddpstudio.core.hints import hints_for
from tests.studio import SCRIPTS, ddpstudio, events, final
from tests.test_exchange_probe import ONE_GPU, RIGHT, child


def died(code: str) -> int:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode


@pytest.mark.posix_only("children killed by POSIX signals; Windows' NTSTATUS codes are tested below")
@pytest.mark.parametrize("code, words", [
    ("import ctypes; ctypes.string_at(0)", "killed by SIGSEGV"),
    ("import os; os.abort()", "killed by SIGABRT"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "killed by SIGKILL"),
    ("import sys; sys.exit(3)", "exit code 3"),
])
def test_a_real_child_is_named_by_how_it_died(code, words):
    assert describe_exit(died(code), LINUX) == words


@pytest.mark.posix_only("the signal module's numbers are Linux's here (Windows has no SIGKILL, SIGABRT is 22)")
def test_native_crashes_are_told_from_being_stopped_on_linux():
    assert is_native_crash(-signal.SIGSEGV, LINUX) and is_native_crash(-signal.SIGABRT, LINUX)
    assert not is_native_crash(-signal.SIGKILL, LINUX) and not is_native_crash(-signal.SIGTERM, LINUX)
    assert not is_native_crash(1, LINUX) and not is_native_crash(0, LINUX) and not is_native_crash(None, LINUX)
    assert describe_exit(-77, LINUX) == "killed by signal 77"
    assert describe_exit(None, LINUX) == "no exit code"


@pytest.mark.parametrize("code, words", [
    (3221225477, "crashed: access violation (0xC0000005)"),  # as subprocess reports it (unsigned)
    (-1073741819, "crashed: access violation (0xC0000005)"),  # as signed APIs report it
    (0xC0000409, "crashed: stack buffer overrun (0xC0000409)"),
    (-1073740791, "crashed: stack buffer overrun (0xC0000409)"),
    (0xC00000FD, "crashed: stack overflow (0xC00000FD)"),
    (0xC000001D, "crashed: illegal instruction (0xC000001D)"),
    (0xC0000374, "crashed: heap corruption (0xC0000374)"),
    (0xC0000135, "crashed: a DLL was not found (0xC0000135)"),
    (0xE06D7363, "crashed: unhandled C++ exception (0xE06D7363)"),
    (0xC0001234, "crashed with Windows status 0xC0001234"),
    (0xC000013A, "interrupted by Ctrl+C (0xC000013A)"),
    (1, "exit code 1"),
    (3, "exit code 3"),
])
def test_windows_status_codes_are_named_in_either_spelling(code, words):
    assert describe_exit(code, WINDOWS) == words
    assert "3221225477" not in describe_exit(code, WINDOWS)


def test_which_windows_codes_are_native_crashes():
    for code in (3221225477, -1073741819, 0xC0000409, 0xC00000FD, 0xE06D7363, 0xC0001234):
        assert is_native_crash(code, WINDOWS), hex(code & 0xFFFFFFFF)
    for code in (0, 1, 2, 3, 0xC000013A):
        assert not is_native_crash(code, WINDOWS), code


def test_a_rank_failure_summary_names_the_crash():
    failure = RankFailure(1, 3221225477, 0.0, "", [], WINDOWS)
    assert failure.summary() == "rank 1 failed first (crashed: access violation (0xC0000005)): no error message"
    assert failure.to_dict()["exit"] == "crashed: access violation (0xC0000005)"
    assert RankFailure(0, -11, 0.0, "", [], LINUX).summary().startswith("rank 0 failed first (killed by SIGSEGV)")


def cache_a_native_answer() -> None:
    probe.store(probe.run(child(ONE_GPU + RIGHT), timeout_s=60, platform=LINUX))
    assert probe.cached_outcome() == "native"


def test_a_gloo_cuda_native_crash_names_the_issue_and_drops_the_cached_probe():
    cache_a_native_answer()
    note = gloo_cuda_crash_note("gloo", "cuda", "native", -1073741819, WINDOWS)
    assert note is not None
    assert "pytorch #186535" in note and "--grad-exchange staged" in note
    assert probe.cached_outcome() is None
    assert [h.key for h in hints_for(f"rank 1 failed first: {note}")] == ["gloo_cuda_crash"]


@pytest.mark.parametrize("backend, device, exchange, code", [
    ("gloo", "cuda", "staged", 3221225477),  # the staged exchange never hands CUDA tensors to Gloo
    ("gloo", "cpu", "native", 3221225477),
    ("nccl", "cuda", "native", 3221225477),
    ("gloo", "cuda", "native", 1),  # a Python error is not this crash
])
def test_other_failures_get_no_note_and_keep_the_probe(backend, device, exchange, code):
    cache_a_native_answer()
    assert gloo_cuda_crash_note(backend, device, exchange, code, WINDOWS) is None
    assert probe.cached_outcome() == "native"


def test_a_real_segfault_on_linux_with_gloo_on_cuda_gets_the_hedged_note():
    code = died("import ctypes; ctypes.string_at(0)")
    note = gloo_cuda_crash_note("gloo", "cuda", None, code, LINUX)
    assert note is not None and "as pytorch #186535 does on Windows" in note


@pytest.mark.slow
def test_a_rank_that_segfaults_is_reported_as_killed_by_sigsegv(studio_home):
    res = ddpstudio("run", "--json", "--rendezvous-timeout", "30", "--script", str(SCRIPTS / "segfault_rank.py"),
                    "--script-style", "env")
    assert res.returncode == 1, res.stderr[-2000:]
    done = final(events(res.stdout))
    cause = done.get("root_cause")
    assert cause["rank"] == 1 and cause["exit_code"] == -signal.SIGSEGV
    assert cause["exit"] == "killed by SIGSEGV"
    assert done.get("summary").startswith("rank 1 failed first (killed by SIGSEGV)")
    assert "exit code -11" not in res.stdout


@pytest.mark.parametrize("code, trained, helper, platform, expected", [
    (-6, True, False, LINUX, "this run had the helper off (--no-rank-helper)"),
    (-6, True, True, LINUX, "did not avoid it this time"),
    (3, True, False, WINDOWS, "this run had the helper off"),
    (-6, False, False, LINUX, None),  # aborted before it trained: not the exit bug
    (-11, True, False, LINUX, None),  # another signal
    (-6, True, False, WINDOWS, None),  # Windows' abort() exits with 3, not a signal
])
def test_the_gloo_abort_at_exit_note(code, trained, helper, platform, expected):
    note = gloo_exit_abort_note("terminate called without an active exception", code, trained, helper, platform)
    if expected is None:
        assert note is None
    else:
        assert expected in note and "pytorch PR #179291" in note and "after it had trained" in note
    assert gloo_exit_abort_note("double free or corruption", code, trained, helper, platform) is None


@pytest.mark.slow
def test_a_script_rank_that_aborts_at_exit_after_training_is_explained(studio_home):
    res = ddpstudio("run", "--json", "--rendezvous-timeout", "30", "--script", str(SCRIPTS / "abort_at_exit.py"),
                    "--script-style", "env", "--no-rank-helper")
    assert res.returncode == 1, res.stderr[-2000:]
    done = final(events(res.stdout))
    assert done.get("root_cause")["exit_code"] == -signal.SIGABRT
    summary = done.get("summary")
    assert summary.startswith("rank 1 failed first (killed by SIGABRT): the rank aborted after it had trained")
    assert "--no-rank-helper" in summary and "terminate called without an active exception" in summary


@pytest.mark.slow
def test_a_native_crash_in_a_gloo_run_on_cuda_names_the_issue_and_drops_the_cached_probe(tmp_path, monkeypatch):
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps({"gpus": [{"name": "NVIDIA RTX A4000", "total_memory_mb": 16376}] * 2}))
    monkeypatch.setenv("DDPSTUDIO_FAKE_GPUS", str(gpus))  # the plan says cuda; the script never touches a GPU
    cache_a_native_answer()  # what let the native exchange be chosen
    res = ddpstudio("run", "--json", "--rendezvous-timeout", "30", "--backend", "gloo",
                    "--script", str(SCRIPTS / "segfault_rank.py"), "--script-style", "env")
    assert res.returncode == 1, res.stderr[-2000:]
    done = final(events(res.stdout))
    assert done.get("summary").startswith("rank 1 failed first (killed by SIGSEGV): the rank crashed inside PyTorch")
    assert "pytorch #186535" in done.get("summary") and "--grad-exchange staged" in done.get("summary")
    assert [h.key for h in hints_for(done.get("summary"))] == ["gloo_cuda_crash"]
    assert probe.cached_outcome() is None
