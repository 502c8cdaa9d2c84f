"""What each rank of an args-style script is told: its device ({local_rank}, {gpu}, one GPU per rank),
which value wins when the user's arguments set the template's flags too, and env:// on any store.

The real runs use ``tests/scripts/show_env.py``, which prints what it was given and then joins a real
Gloo group as its arguments say. GPUs come through the documented seam ``DDPSTUDIO_FAKE_GPUS``.
"""

from __future__ import annotations

import json

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.argclash import clashes
from ddpstudio.core.launch.commands import dist_args, rank_env, visible_gpu
from ddpstudio.core.plan import Plan, ScriptSpec
from tests.conftest import processes_of
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

SCRIPT = str(SCRIPTS / "show_env.py")
DEVICE_TEMPLATE = "--dist-url {url} --world-size {world_size} --rank {rank} --local-rank {local_rank} --gpu {gpu}"


def plan_for(args: list[str] | None = None, template: str = DEVICE_TEMPLATE, one: bool = False) -> Plan:
    return Plan(run_id="r", run_dir="/tmp/r", world_size=2, backend="nccl", device="cuda", store="file",
                init_method="file:///tmp/pg", script=ScriptSpec(path="train.py", args=args or [], dist_args=template,
                                                                one_gpu_per_rank=one))


def fake_gpus(tmp_path, monkeypatch, count: int) -> None:
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps({"gpus": [{"name": "NVIDIA RTX A4000", "total_memory_mb": 16376}] * count}))
    monkeypatch.setenv("DDPSTUDIO_FAKE_GPUS", str(gpus))


def seen(evs: list[protocol.Event]) -> dict[int, dict]:
    """Each rank's ``SEEN {...}`` line, parsed."""
    return {e.rank: json.loads(e.get("line")[5:]) for e in of_type(evs, protocol.LOG)
            if str(e.get("line", "")).startswith("SEEN ")}


# -- the template's device fields, and one GPU per rank --------------------------------------------------
def test_local_rank_and_gpu_name_the_ranks_device():
    assert dist_args(DEVICE_TEMPLATE, plan_for(), 1)[-4:] == ["--local-rank", "1", "--gpu", "1"]
    # Each rank sees only its own GPU: for the rank it is cuda:0.
    assert dist_args(DEVICE_TEMPLATE, plan_for(one=True), 1)[-4:] == ["--local-rank", "1", "--gpu", "0"]


def test_on_the_second_of_two_machines_local_rank_gpu_and_visible_gpu_count_from_the_machines_first_rank():
    from dataclasses import replace

    second = replace(plan_for(), world_size=4, nodes=2, node_rank=1)  # global ranks 2 and 3 here
    assert [dist_args(DEVICE_TEMPLATE, second, r)[-6:] for r in (2, 3)] == \
        [["--rank", "2", "--local-rank", "0", "--gpu", "0"], ["--rank", "3", "--local-rank", "1", "--gpu", "1"]]
    env = rank_env(replace(second, script=replace(second.script, one_gpu_per_rank=True)), 3, "/tmp/events",
                   base={"CUDA_VISIBLE_DEVICES": "2,7"})
    assert (env["RANK"], env["LOCAL_RANK"], env["GROUP_RANK"], env["CUDA_VISIBLE_DEVICES"]) == ("3", "1", "1", "7")


def test_one_gpu_per_rank_takes_the_rank_th_of_the_gpus_the_launcher_may_use():
    assert [visible_gpu(r, None) for r in (0, 1)] == ["0", "1"]
    assert [visible_gpu(r, "3, 5") for r in (0, 1)] == ["3", "5"]
    env = rank_env(plan_for(one=True), 1, "/tmp/events", base={"CUDA_VISIBLE_DEVICES": "2,7"})
    assert env["CUDA_VISIBLE_DEVICES"] == "7"
    assert "CUDA_VISIBLE_DEVICES" not in rank_env(plan_for(), 1, "/tmp/events", base={})


@pytest.mark.slow
@pytest.mark.parametrize("argv, words", [
    (["--one-gpu-per-rank"], ["one GPU per rank", "on the CPU", "--one-gpu-per-rank"]),
    (["--dist-args", DEVICE_TEMPLATE], ["uses {gpu}", "on the CPU", "remove {gpu}"]),
])
def test_gpu_settings_on_a_cpu_run_are_refused_with_nothing_started(studio_home, tmp_path, monkeypatch, argv, words):
    fake_gpus(tmp_path, monkeypatch, 0)  # no GPU, wherever the test runs
    res = ddpstudio("run", "--script", SCRIPT, *argv)
    assert res.returncode == 2 and res.stdout == "", res.stdout + res.stderr
    [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("ddpstudio: error:")]
    assert all(word in line for word in words), line
    assert not (studio_home / "runs").exists() or not any((studio_home / "runs").iterdir())


def test_one_gpu_per_rank_is_refused_for_the_built_in_recipe(studio_home):
    res = ddpstudio("run", "--demo", "--one-gpu-per-rank")
    assert res.returncode == 2 and "--one-gpu-per-rank is for your own script" in res.stderr


@pytest.mark.slow
def test_with_one_gpu_per_rank_each_rank_sees_only_its_gpu_as_device_0(studio_home, tmp_path, monkeypatch):
    fake_gpus(tmp_path, monkeypatch, 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")  # the GPUs this launcher may use
    res = ddpstudio("run", "--json", "--backend", "gloo", "--one-gpu-per-rank", "--dist-args", DEVICE_TEMPLATE,
                    "--script", SCRIPT, timeout=120)
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    by_rank = seen(events(res.stdout))
    assert {r: s["env"]["CUDA_VISIBLE_DEVICES"] for r, s in by_rank.items()} == {0: "3", 1: "5"}
    assert {r: (s["args"]["local_rank"], s["args"]["gpu"]) for r, s in by_rank.items()} == {0: (0, 0), 1: (1, 0)}
    assert not processes_of(studio_home)


# -- the user's own --world-size / --rank / --dist-url, and env:// on the file store ---------------------
def test_a_clash_names_both_values_and_says_the_template_wins():
    plan = plan_for(["data", "--world-size", "1", "--rank=0", "--dist-url", "file:///tmp/pg"],
                    "--dist-url {url} --world-size {world_size} --rank {rank}")
    found = {c.flag: c for c in clashes(plan)}
    assert set(found) == {"--world-size", "--rank"}  # the same --dist-url twice overrides nothing
    assert found["--world-size"].message() == (
        "your script arguments say --world-size 1, the --dist-args template says --world-size 2: the template's "
        "value wins (it comes last, and matches the ranks and store this run started); to keep yours, take "
        "--world-size out of --dist-args")
    assert found["--rank"].ours == "0..1 (one per rank)"
    # A flag left out of the template is the user's own: nothing to say.
    assert clashes(plan_for(["--world-size", "1"], "--dist-url {url} --rank {rank}")) == []


@pytest.mark.slow
def test_env_template_on_the_file_store_joins_and_the_users_clashing_flags_are_named(studio_home, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    res = ddpstudio("run", "--json", "--store", "file", "--script", SCRIPT,
                    "--dist-args", "--dist-url env:// --world-size {world_size} --rank {rank}",
                    "--", "--world-size", "1", "--rank", "0", timeout=120)
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    started = of_type(evs, protocol.RUN_STARTED)[0]
    assert started.get("store") == "file"
    port = json.loads((studio_home / "runs" / started.get("run_id") / "plan.json").read_text())["master_port"]
    assert any(f"MASTER_PORT={port}" in reason for reason in started.get("reasons"))
    by_rank = seen(evs)
    assert {r: s["env"] for r, s in by_rank.items()} == {
        r: {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port), "CUDA_VISIBLE_DEVICES": None} for r in (0, 1)}
    assert {(e.rank, e.get("line")) for e in of_type(evs, protocol.LOG)} >= {(0, "sum 1"), (1, "sum 1")}
    warnings = [e.get("message") for e in of_type(evs, protocol.WARNING)]
    assert [w.split(",")[0] for w in warnings if w.startswith("your script arguments")] == [
        "your script arguments say --world-size 1", "your script arguments say --rank 0"]
    assert {r: s["args"]["world_size"] for r, s in by_rank.items()} == {0: 2, 1: 2}  # the template's won
    assert final(evs).get("state") == "finished"
