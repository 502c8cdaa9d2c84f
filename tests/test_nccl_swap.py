"""Issue 23 §3: a script that asks for NCCL where there is none trains over Gloo, said once.

"No NCCL here" comes through ``DDPSTUDIO_NO_NCCL`` (core/protocol.py NO_NCCL_ENV), which the launcher sets
from its Platform on Windows (no NCCL in the build) and from its plan for a run on the CPU (NCCL needs GPUs:
torch 2.14.1's CUDA build here has NCCL, ``is_nccl_available()`` is true, but this machine has no GPU for
it). The runs below are this machine's CPU case, for real; the Windows words come through the same seam.
Real ranks, real Gloo.
"""

from __future__ import annotations


import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.rank import ncclswap
from tests.conftest import processes_of
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

SCRIPT = str(SCRIPTS / "nccl_torchrun.py")
SAID = "this script asks for NCCL, which Windows builds of PyTorch do not have: Gloo is used instead"
SAID_HERE = "this script asks for NCCL, which needs CUDA GPUs, and this run has none: Gloo is used instead"


@pytest.mark.parametrize("asked, instead", [
    ("nccl", "gloo"), ("NCCL", "gloo"), ("cuda:nccl", "gloo"), ("cpu:gloo,cuda:nccl", "gloo"),
    ("cpu:gloo,cuda:nccl,xpu:xccl", "cpu:gloo,cuda:gloo,xpu:xccl"),
    ("gloo", None), ("mpi", None), (None, None), ("", None)])
def test_the_backend_instead_of_nccl(asked, instead):
    assert ncclswap.gloo_for(asked) == instead


def test_no_nccl_comes_from_the_seam_or_from_torch_itself(monkeypatch):
    import torch.distributed as dist

    monkeypatch.delenv(protocol.NO_NCCL_ENV, raising=False)
    assert dist.is_nccl_available() and ncclswap.missing(dist) is None  # this machine's CUDA build has NCCL
    from torch.distributed import Backend

    assert ncclswap.gloo_for(Backend.NCCL) == "gloo"  # torch's own constant is a string
    monkeypatch.setenv(protocol.NO_NCCL_ENV, protocol.NO_NCCL_WINDOWS)
    assert ncclswap.message(ncclswap.missing(dist)) == SAID
    monkeypatch.setenv(protocol.NO_NCCL_ENV, protocol.NO_NCCL_NO_GPU)
    assert ncclswap.message(ncclswap.missing(dist)) == SAID_HERE


def test_the_launcher_says_no_nccl_to_a_scripts_ranks_on_windows_and_on_the_cpu_only():
    from ddpstudio.core.launch.commands import rank_env
    from ddpstudio.core.plan import RecipeSpec, ScriptSpec
    from ddpstudio.core.platform import LINUX, WINDOWS
    from ddpstudio.core.gpu import FakeGpuSource, detect_inventory
    from ddpstudio.core.policy import Request, build_plan

    cpu = detect_inventory()  # the real machine: no driver, no CUDA
    gpus = detect_inventory(FakeGpuSource([{"name": "NVIDIA GeForce RTX 4090", "total_memory_mb": 24564,
                                            "compute_capability": "8.9"}] * 2))
    script = Request(script=ScriptSpec(path=SCRIPT, style="env"), store="tcp", port=29511)
    for machine in (cpu, gpus):
        on_windows = build_plan(script, WINDOWS, machine, interfaces={})
        assert on_windows.env[protocol.NO_NCCL_ENV] == protocol.NO_NCCL_WINDOWS
        assert rank_env(on_windows, 1, "/events", base={})[protocol.NO_NCCL_ENV] == protocol.NO_NCCL_WINDOWS
    on_linux_cpu = build_plan(script, LINUX, cpu, interfaces={})
    assert on_linux_cpu.device == "cpu" and on_linux_cpu.env[protocol.NO_NCCL_ENV] == protocol.NO_NCCL_NO_GPU
    on_linux_gpus = build_plan(script, LINUX, gpus, interfaces={})  # NCCL is there: the script gets what it asks
    assert on_linux_gpus.device == "cuda" and protocol.NO_NCCL_ENV not in on_linux_gpus.env
    recipe = Request(recipe=RecipeSpec(), store="tcp", port=29511)
    assert protocol.NO_NCCL_ENV not in build_plan(recipe, WINDOWS, cpu, interfaces={}).env


def _run(*extra: str):
    res = ddpstudio("run", "--json", "--script", SCRIPT, "--script-style", "env", "--world-size", "2",
                    "--rendezvous-timeout", "60", *extra, timeout=180)
    return res, events(res.stdout)


@pytest.mark.slow
def test_a_script_that_asks_for_nccl_trains_over_gloo_and_says_so_once(studio_home):
    from ddpstudio.core.platform import current

    said = SAID if current().is_windows else SAID_HERE  # the windows-latest workflow runs it too: Windows' words
    res, evs = _run("--grad-exchange", "staged")
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    joined = of_type(evs, protocol.RANK_JOINED)
    assert sorted(e.rank for e in joined) == [0, 1]
    for ev in joined:
        assert (ev.get("backend"), ev.get("asked_backend"), ev.get("world_size")) == ("gloo", "nccl", 2)
        assert (ev.get("device"), ev.get("grad_exchange")) == ("cpu", "staged")
    [warning] = of_type(evs, protocol.WARNING)
    assert (warning.rank, warning.get("message")) == (0, said)
    lines = {rank: [e.get("line") for e in of_type(evs, protocol.LOG) if e.rank == rank] for rank in (0, 1)}
    assert lines[0].count(f"ddpstudio rank helper: {said}") == 1
    assert not any(said in line for line in lines[1])
    for rank in (0, 1):
        assert f"rank {rank} backend gloo device cpu" in lines[rank]
        assert f"rank {rank} comm hooks: ['staged_hook']" in lines[rank]  # the staged exchange, as planned
    losses = {rank: [e.get("loss") for e in of_type(evs, protocol.STEP) if e.rank == rank] for rank in (0, 1)}
    assert len(losses[0]) == 5 and losses[0] == losses[1] and losses[0][-1] < losses[0][0]
    assert final(evs).get("state") == protocol.FINISHED
    kept = RunDir.at(final(evs).get("run_dir")).merged_events.read_text(encoding="utf-8")
    assert kept.count(said) == 2  # the run's log: the warning, and rank 0's line
    assert not processes_of(studio_home)


@pytest.mark.slow
def test_without_the_rank_helper_the_script_fails_as_alone_with_the_hint_that_names_the_fix(studio_home):
    from ddpstudio.core.hints import hints_for

    res, evs = _run("--no-rank-helper")
    done = final(evs)
    assert res.returncode == 1 and done.get("state") == protocol.FAILED, res.stderr[-3000:]
    assert not of_type(evs, protocol.RANK_JOINED) and not of_type(evs, protocol.WARNING)
    # Here NCCL is built in but finds no GPU; a Windows build says it has no NCCL. One hint for both.
    assert "ProcessGroupNCCL is only supported with GPUs, no GPUs found!" in done.get("summary")
    for text in (done.get("summary"), "RuntimeError: Distributed package doesn't have NCCL built in"):
        [hint] = hints_for(text)
        assert hint.key == "no_nccl" and "--no-rank-helper" in hint.text and "Gloo" in hint.text
    assert not processes_of(studio_home)
