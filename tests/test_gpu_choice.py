"""Choosing which GPUs train (issue 23, section 4): ``--gpus 0,2`` resolved against the inventory, the ranks
shown only those GPUs by UUID, one rank per chosen GPU, only their load in the run's history, and one clear
error (exit 2, nothing left behind) for a GPU that is not there.

GPUs come through the documented seam: ``FakeGpuSource`` in process, ``DDPSTUDIO_FAKE_GPUS`` for the real
``ddpstudio run`` subprocess, whose ranks run ``tests/scripts/show_env.py`` over Gloo on the CPU.
"""

from __future__ import annotations

import json

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.gpu import FakeGpuSource, GpuInfo, detect_inventory
from ddpstudio.core.gpu.cudadriver import NoCudaMachine
from ddpstudio.core.gpu.selection import SelectionError, choose_gpus
from ddpstudio.core.launch.commands import rank_env
from ddpstudio.core.metrics import rows
from ddpstudio.core.plan import ScriptSpec
from ddpstudio.core.platform import LINUX
from ddpstudio.core.policy import PolicyError, Request, build_plan
from tests.conftest import processes_of
from tests.machine import NO_GPU
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

SCRIPT = str(SCRIPTS / "show_env.py")
# Three GPUs, the middle one a slow display card; each with its own load, so the history tells them apart.
GPUS = [{"name": "NVIDIA RTX A4000", "total_memory_mb": 16376, "uuid": "GPU-5f2a0c1e-0000", "utilization_pct": 11,
         "memory_used_mb": 1024},
        {"name": "NVIDIA GeForce GT 1030", "total_memory_mb": 2048, "uuid": "GPU-9b7d3e44-1111", "utilization_pct": 22,
         "memory_used_mb": 512},
        {"name": "NVIDIA RTX A4000", "total_memory_mb": 16376, "uuid": "GPU-c04e8a90-2222", "utilization_pct": 33,
         "memory_used_mb": 2048}]
UUIDS = [gpu["uuid"] for gpu in GPUS]
INTERFACES = {"lo": ["127.0.0.1"]}


def info(index: int, uuid: str | None) -> GpuInfo:
    return GpuInfo(index, "NVIDIA RTX A4000", 16376.0, "8.6", uuid)


def plan_for(gpus, world_size=None, machine=None, **script):
    request = Request(backend="gloo", world_size=world_size, gpus=gpus,
                      script=ScriptSpec(path=SCRIPT, **script))
    return build_plan(request, LINUX, machine or detect_inventory(FakeGpuSource(GPUS)), INTERFACES,
                      probe=lambda: None)


# -- the choice itself ------------------------------------------------------------------------------------
def test_numbers_and_uuids_name_the_same_cards_and_the_ranks_get_uuids_in_torchs_order(monkeypatch):
    gpus = [info(0, UUIDS[0]), info(1, UUIDS[1]), info(2, UUIDS[2])]
    by_number = choose_gpus(["2", "0"], gpus)
    assert by_number.visible == f"{UUIDS[0]},{UUIDS[2]}" and by_number.ids == [UUIDS[0], UUIDS[2]]
    assert choose_gpus([UUIDS[2].lower(), "0"], gpus) == by_number
    assert by_number.names == "0 and 2" and by_number.count == 3


def test_a_gpu_without_a_uuid_is_named_within_the_inherited_visible_devices():
    # torch numbers the GPUs it was allowed (CUDA_VISIBLE_DEVICES=3,5): its GPU 1 is the machine's 5.
    assert choose_gpus(["1"], [info(0, None), info(1, None)], inherited="3,5").visible == "5"
    assert choose_gpus(["1"], [info(0, None), info(1, None)]).visible == "1"
    # One kind only: torch stops reading CUDA_VISIBLE_DEVICES at the first item of another kind.
    assert choose_gpus(["0", "1"], [info(0, UUIDS[0]), info(1, None)], inherited="3,5").visible == "3,5"


@pytest.mark.parametrize("asked, words", [
    (["3"], ["there is no GPU 3 here", "0: NVIDIA RTX A4000 (GPU-5f2a0c1e-0000)", "choose among those numbers"]),
    (["GPU-deadbeef-9999"], ["GPU GPU-deadbeef-9999 is not in this machine", "removed or replaced",
                             "choose the GPUs again"]),
    (["0", "0"], ["GPU 0 is chosen twice (--gpus 0,0)", "name each GPU once"]),
    (["2", UUIDS[2]], ["GPU 2 is chosen twice"]),  # a number and a UUID for the same card
    (["first"], ["'first' names no GPU", "--gpus 0,2", "UUIDs"]),
    ([], ["no GPU chosen", "choose at least one"]),
])
def test_a_choice_that_names_no_gpu_here_says_what_is_wrong_and_what_to_do(asked, words):
    with pytest.raises(SelectionError) as caught:
        choose_gpus(asked, [info(0, UUIDS[0]), info(1, UUIDS[1]), info(2, UUIDS[2])])
    assert all(word in str(caught.value) for word in words), str(caught.value)
    assert caught.value.field == "gpus"


# -- the plan ---------------------------------------------------------------------------------------------
def test_the_plan_shows_the_ranks_only_the_chosen_gpus_one_rank_each():
    plan = plan_for(("0", "2"))
    assert plan.world_size == 2 and plan.gpus == [UUIDS[0], UUIDS[2]]
    assert plan.env["CUDA_VISIBLE_DEVICES"] == f"{UUIDS[0]},{UUIDS[2]}"
    assert any(r.startswith("GPUs 0 and 2 of 3, chosen by you") for r in plan.reasons), plan.reasons
    assert "2 ranks: one per chosen GPU" in plan.reasons
    envs = [rank_env(plan, r, "/tmp/events", base={"CUDA_VISIBLE_DEVICES": "1"}) for r in (0, 1)]
    assert {env["CUDA_VISIBLE_DEVICES"] for env in envs} == {f"{UUIDS[0]},{UUIDS[2]}"}  # the choice wins
    # One GPU per rank: each rank sees its own chosen GPU, as cuda:0.
    one = plan_for(("0", "2"), one_gpu_per_rank=True)
    assert [rank_env(one, r, "/tmp/events", base={})["CUDA_VISIBLE_DEVICES"] for r in (0, 1)] == [UUIDS[0], UUIDS[2]]
    assert plan_for(None).gpus is None and "CUDA_VISIBLE_DEVICES" not in plan_for(None).env


def test_an_explicit_world_size_must_match_the_chosen_gpus():
    assert plan_for(("1",), world_size=1).world_size == 1
    with pytest.raises(PolicyError) as caught:
        plan_for(("0", "2"), world_size=3)
    assert caught.value.field == "world_size"
    assert str(caught.value).startswith("3 ranks asked with 2 GPUs chosen (0 and 2)")


@pytest.mark.parametrize("machine", [NoCudaMachine("the NVIDIA driver's CUDA library cannot be loaded"),
                                     detect_inventory(FakeGpuSource(**NO_GPU))])
def test_gpus_on_a_machine_that_trains_on_the_cpu_are_refused(machine):
    with pytest.raises(PolicyError) as caught:
        plan_for(("0",), machine=machine)
    assert caught.value.field == "gpus"
    assert "GPUs are chosen (--gpus 0), but this run trains on the CPU" in str(caught.value)


def test_the_history_keeps_only_the_chosen_gpus_load():
    from ddpstudio.core.gpu import Snapshot

    snapshot = Snapshot(t=10.0, mode="gpu", gpus=FakeGpuSource(GPUS).sample())
    kept = {(r[0], r[1]) for r in rows.snapshot_rows(snapshot, {}, 0.0, [UUIDS[0], UUIDS[2]])}
    assert kept == {(rows.GPU_UTIL, 0), (rows.GPU_MEM_GB, 0), (rows.GPU_UTIL, 2), (rows.GPU_MEM_GB, 2)}
    assert len(rows.snapshot_rows(snapshot, {}, 0.0)) == 6


# -- the real command line --------------------------------------------------------------------------------
def fake_gpus(tmp_path, monkeypatch, data: dict) -> None:
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setenv("DDPSTUDIO_FAKE_GPUS", str(path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.mark.slow
def test_run_with_gpus_trains_one_rank_per_chosen_gpu_that_sees_only_those(studio_home, tmp_path, monkeypatch):
    fake_gpus(tmp_path, monkeypatch, {"gpus": GPUS})
    res = ddpstudio("run", "--json", "--backend", "gloo", "--gpus", "2,0", "--script", SCRIPT, timeout=180)
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    seen = {e.rank: json.loads(e.get("line")[5:]) for e in of_type(evs, protocol.LOG)
            if str(e.get("line", "")).startswith("SEEN ")}
    assert {r: s["env"]["CUDA_VISIBLE_DEVICES"] for r, s in seen.items()} == {
        0: f"{UUIDS[0]},{UUIDS[2]}", 1: f"{UUIDS[0]},{UUIDS[2]}"}
    assert {r: s["args"]["world_size"] for r, s in seen.items()} == {0: 2, 1: 2}
    started = of_type(evs, protocol.RUN_STARTED)[0]
    assert any(r.startswith("GPUs 0 and 2 of 3, chosen by you") for r in started.get("reasons"))
    assert final(evs).get("state") == "finished"
    run_dir = studio_home / "runs" / started.get("run_id")
    assert json.loads((run_dir / "plan.json").read_text())["gpus"] == [UUIDS[0], UUIDS[2]]
    lines = [json.loads(line) for line in (run_dir / rows.FILE_NAME).read_text().splitlines()[1:]]
    assert {row[1] for row in lines if row[0] == rows.GPU_UTIL} == {0, 2}  # GPU 1's load is not this run's
    assert not processes_of(studio_home)


@pytest.mark.slow
@pytest.mark.parametrize("argv, machine, words", [
    (["--gpus", "0,3"], {"gpus": GPUS}, ["there is no GPU 3 here", "choose among those numbers"]),
    (["--gpus", "GPU-deadbeef-9999"], {"gpus": GPUS}, ["is not in this machine", "choose the GPUs again"]),
    (["--gpus", "1,1"], {"gpus": GPUS}, ["GPU 1 is chosen twice", "name each GPU once"]),
    (["--gpus", "0,2", "--world-size", "3"], {"gpus": GPUS}, ["3 ranks asked with 2 GPUs chosen",
                                                              "leave the world size on auto"]),
    (["--gpus", "0"], NO_GPU, ["this run trains on the CPU", "leave the GPU choice out"]),
])
def test_run_refuses_a_gpu_that_is_not_there_with_exit_2_and_nothing_started(studio_home, tmp_path, monkeypatch,
                                                                              argv, machine, words):
    fake_gpus(tmp_path, monkeypatch, machine)
    res = ddpstudio("run", "--backend", "gloo", *argv, "--script", SCRIPT)
    assert res.returncode == 2 and res.stdout == "", res.stdout + res.stderr
    [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("ddpstudio: error:")]
    assert all(word in line for word in words), line
    assert not (studio_home / "runs").exists() or not any((studio_home / "runs").iterdir())
    assert not processes_of(studio_home)


def test_host_and_bench_refuse_gpus_and_say_what_to_do_instead(studio_home):
    host = ddpstudio("host", "--nodes", "2", "--gpus", "0")
    assert host.returncode == 2 and "--gpus chooses the GPUs of one machine" in host.stderr, host.stderr
    assert "CUDA_VISIBLE_DEVICES" in host.stderr
    bench = ddpstudio("bench", "--gpus", "0")
    assert bench.returncode == 2 and "--gpus is not a benchmark option" in bench.stderr, bench.stderr
    assert not (studio_home / "runs").exists() or not any((studio_home / "runs").iterdir())
