"""'ddpstudio export-job': a run handed to torchrun (two real node agents over loopback, 2 x 2 Gloo ranks, read
back by 'ddpstudio runs'), to SLURM (the sbatch script under stand-in srun/scontrol: no SLURM runs here), and to
SkyPilot and Kubeflow Trainer (their documents parsed, their commands run under the variables those set)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ddpstudio.core import protocol
from ddpstudio.core.plan import Plan, RecipeSpec, ScriptSpec
from ddpstudio.core.rendezvous.ports import find_free_port
from ddpstudio.rank.balance import SLOW_ENV
from tests.conftest import processes_of

STANDINS = Path(__file__).parent / "standins" / "slurm"
VENV_BIN = str(Path(sys.executable).parent)  # torchrun lies beside the interpreter
# The built-in perceptron on tiny images: its loss falls within a few steps at lr 0.1 (as in test_nodes_run.py).
TRAIN = ["run", "--model", "mlp", "--batch-size", "8", "--image-size", "8", "--lr", "0.1", "--max-steps", "6"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddpstudio", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def export(out: Path, options: list[str], source: list[str]) -> Path:
    """``ddpstudio export-job OPTIONS -o OUT SOURCE``: the job file, written."""
    done = cli("export-job", *options, "-o", str(out), *source)
    assert done.returncode == 0, done.stderr
    return out


def rank_events(run_dir: Path) -> dict[int, list[protocol.Event]]:
    out = {}
    for path in sorted((run_dir / "events").glob("rank*.jsonl")):
        parser = protocol.EventParser()
        out[int(path.stem[4:])] = [e for line in path.read_text(encoding="utf-8").splitlines()
                                   for e in parser.feed(line)]
    return out


def stop_group(proc: subprocess.Popen) -> None:
    """Kill a node's whole session (bash, torchrun's agent, its ranks) if it is still there."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def session_members(sid: int) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (OSError, psutil.Error):
            continue
    return found


@pytest.fixture
def node_agents(studio_home):
    """``start(job, run_dir, nodes, **env)``: that many torchrun node agents (``bash JOB``, each in a session of
    its own). Pass or fail, every process of the run ends with the test: the agents' sessions, and the ranks,
    which torchrun starts in sessions of their own (torch/distributed/elastic/multiprocessing/subprocess_handler/
    subprocess_handler.py ``_popen``: ``kwargs["start_new_session"] = True``), so that killing an agent's
    session leaves them running. They are found by this test's DDP Studio home in their command line (the run
    folder lies in it) or environment (conftest.py ``processes_of``); then none may be left."""
    started: list[subprocess.Popen] = []

    def start(job: Path, run_dir: Path, count: int, **extra: str) -> list[subprocess.Popen]:
        env = {**os.environ, "DDPSTUDIO_RUN_DIR": str(run_dir), "PATH": VENV_BIN + os.pathsep + os.environ["PATH"],
               **extra}
        started.extend(subprocess.Popen(["bash", str(job)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, text=True, start_new_session=True)
                       for _ in range(count))
        return started[-count:]

    yield start
    for node in started:
        stop_group(node)
    found = processes_of(studio_home)
    for proc in found:
        try:
            proc.kill()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(found, timeout=10)
    assert not alive, f"processes of the run left running: {[p.pid for p in alive]}"


@pytest.mark.slow
@pytest.mark.posix_only("torchrun's elastic agent does not start on Windows wheels (pytorch #148283)")
@pytest.mark.timeout(235)
def test_torchrun_export_trains_on_two_node_agents_and_reads_as_a_run(tmp_path, studio_home, node_agents):
    port = find_free_port()
    job = export(tmp_path / "job.sh", ["--to", "torchrun", "--nodes", "2", "--gpus-per-node", "2", "--host",
                                       "127.0.0.1", "--port", str(port)], TRAIN)
    assert f"--rdzv-endpoint \"$HEAD_NODE:{port}\"" in job.read_text()
    run_dir = studio_home / "runs" / "from-torchrun"
    nodes = node_agents(job, run_dir, 2)
    deadline = time.monotonic() + 200
    try:
        outputs = [n.communicate(timeout=max(1.0, deadline - time.monotonic()))[0] for n in nodes]
    finally:
        for n in nodes:
            stop_group(n)
    assert [n.returncode for n in nodes] == [0, 0], outputs
    for n in nodes:  # torchrun's agents and their ranks: nothing of either node's session is left
        assert session_members(n.pid) == []

    events = rank_events(run_dir)
    assert sorted(events) == [0, 1, 2, 3]
    joined = [e for evs in events.values() for e in evs if e.type == protocol.RANK_JOINED]
    assert sorted((e.get("global_rank"), e.get("local_rank"), e.get("group_size")) for e in joined) == [
        (0, 0, 4), (1, 1, 4), (2, 0, 4), (3, 1, 4)]
    losses = [e.get("loss") for e in events[0] if e.type == protocol.GLOBAL_STEP]
    assert len(losses) == 6 and losses[-1] < losses[0]

    listed = cli("runs", "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = [r for r in json.loads(listed.stdout)["runs"] if r["run_dir"] == str(run_dir)]
    assert entry["world_size"] == 4 and entry["nodes"] == 2 and entry["backend"] == "gloo"
    assert entry["final_loss"] == pytest.approx(losses[-1])


def test_slurm_script_is_valid_bash_and_hands_nodes_and_endpoint_to_torchrun(tmp_path, studio_home):
    job = export(tmp_path / "job.sbatch", ["--to", "slurm", "--nodes", "3", "--gpus-per-node", "4", "--port",
                                           "29511", "--max-restarts", "2"], TRAIN)
    text = job.read_text()
    assert subprocess.run(["bash", "-n", str(job)], capture_output=True).returncode == 0
    assert "#SBATCH --nodes=3" in text and "#SBATCH --ntasks-per-node=1" in text

    record, srun_record = tmp_path / "torchrun.jsonl", tmp_path / "srun.txt"
    run_dir = tmp_path / "shared" / "run"
    env = {**os.environ, "PATH": str(STANDINS) + os.pathsep + os.environ["PATH"], "TORCHRUN_RECORD": str(record),
           "SRUN_RECORD": str(srun_record), "SLURM_JOB_NODELIST": "gpu-a,gpu-b,gpu-c", "SLURM_JOB_NUM_NODES": "3",
           "SLURM_JOB_ID": "4242", "DDPSTUDIO_RUN_DIR": str(run_dir)}
    done = subprocess.run(["bash", str(job)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--ntasks-per-node=1" in srun_record.read_text().split()

    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert sorted(c["node"] for c in calls) == ["gpu-a", "gpu-b", "gpu-c"]
    from torch.distributed.run import get_args_parser  # torchrun's own parser reads what the script gives it

    for call in calls:
        assert call["events_dir"] == str(run_dir / "events")
        args = get_args_parser().parse_args(call["argv"])
        assert (args.nnodes, args.nproc_per_node, args.rdzv_backend) == ("3", "4", "c10d")
        assert (args.rdzv_endpoint, args.rdzv_id, args.max_restarts) == ("gpu-a:29511", "4242", 2)
        assert args.module and args.training_script == "ddpstudio.rank.recipe"
        assert args.training_script_args == [str(run_dir / "plan.json"), "--init-method", "env://"]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert (plan["world_size"], plan["nodes"], plan["init_method"]) == (12, 3, "env://")


def _windows_run(studio_home: Path, **request) -> Plan:
    """A past run from a Windows workstation (the platform seam): its plan written into the runs folder."""
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.platform import WINDOWS
    from ddpstudio.core.policy import Request, build_plan, write_plan

    loop = {"Loopback Pseudo-Interface 1": ["127.0.0.1"]}
    plan = build_plan(Request(store="tcp", **request), WINDOWS, detect_inventory(), interfaces=loop)
    write_plan(plan)
    return plan


def test_a_windows_run_goes_to_linux_gpus_without_this_machines_settings(studio_home, capsys):
    from ddpstudio.cli.main import main

    past = _windows_run(studio_home, recipe=RecipeSpec(model="mlp"))
    assert {"GLOO_SOCKET_IFNAME", "USE_LIBUV"} <= set(past.env)
    assert main(["export-job", "--to", "torchrun", "--nodes", "2", "--gpus-per-node", "8", "--device", "cuda",
                 past.run_id]) == 0
    text = capsys.readouterr().out
    header = text.split("set -euo pipefail")[0]
    assert f"exported from run {past.run_id}" in header and "backend nccl on cuda" in header
    assert "dropped GLOO_SOCKET_IFNAME" in header and "dropped USE_LIBUV" in header
    assert "export GLOO_SOCKET_IFNAME" not in text and "export USE_LIBUV" not in text
    assert 'HEAD_NODE="${HEAD_NODE:?' in text  # no --host: the user names the first node when it runs
    plan = json.loads(text.split("<<'DDPSTUDIO_PLAN'\n")[1].split("\nDDPSTUDIO_PLAN\n")[0])
    assert (plan["backend"], plan["device"], plan["world_size"], plan["env"]) == ("nccl", "cuda", 16, {})
    assert plan["run_id"] != past.run_id and plan["grad_exchange"] == "native"
    assert plan["recipe"]["workers"] is None  # each node chooses for its own cores, not this machine's number


def test_the_gpus_chosen_here_stay_here_and_accumulation_and_restarts_go_along(studio_home, capsys):
    from dataclasses import replace

    from ddpstudio.cli.main import main
    from ddpstudio.core.policy import write_plan

    past = _windows_run(studio_home, recipe=RecipeSpec(model="mlp", batch_size=16, accumulate=2), max_restarts=2)
    chosen = replace(past, env={**past.env, "CUDA_VISIBLE_DEVICES": "GPU-0a1b"}, gpus=["GPU-0a1b"])
    write_plan(chosen)  # as a run with --gpus on a GPU workstation leaves it
    assert main(["export-job", "--to", "torchrun", "--nodes", "2", "--gpus-per-node", "4", "--device", "cuda",
                 past.run_id]) == 0
    text = capsys.readouterr().out
    assert "dropped CUDA_VISIBLE_DEVICES" in text.split("set -euo pipefail")[0]
    assert "--max-restarts 2" in text  # the run's own restarts, torchrun's to do now
    plan = json.loads(text.split("<<'DDPSTUDIO_PLAN'\n")[1].split("\nDDPSTUDIO_PLAN\n")[0])
    assert (plan["env"], plan["gpus"], plan["max_restarts"]) == ({}, None, 0)
    assert plan["effective_batch"] == 16 * 8 * 2 and plan["recipe"]["accumulate"] == 2


def test_run_options_may_name_the_clusters_data_folder(studio_home, capsys):
    from ddpstudio.cli.main import main

    assert main(["export-job", "--to", "slurm", "--nodes", "2", "run", "--model", "mlp", "--data",
                 "/cluster/imagenet", "--workers", "6"]) == 0  # no such folder here: it lives on the cluster
    text = capsys.readouterr().out
    assert "the data at /cluster/imagenet on every node" in text.split("set -euo pipefail")[0]
    plan = json.loads(text.split("<<'DDPSTUDIO_PLAN'\n")[1].split("\nDDPSTUDIO_PLAN\n")[0])
    assert (plan["recipe"]["data_dir"], plan["recipe"]["workers"]) == ("/cluster/imagenet", 6)


def test_an_args_style_script_gets_each_ranks_arguments_from_torchruns_environment(tmp_path, studio_home):
    from ddpstudio.core.jobs.job import Shape, cluster_job

    script = tmp_path / "train.py"
    script.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    past = _windows_run(studio_home, script=ScriptSpec(path=str(script), args=["--epochs", "2"], style="args"))
    job = cluster_job(past, Shape(nodes=2, procs_per_node=2), "a test")
    assert job.entry[:3] == ["--no-python", "sh", "-c"]  # what torchrun starts per rank: a shell fills the rank
    env = {**os.environ, "PATH": VENV_BIN + os.pathsep + os.environ["PATH"], "RANK": "3", "LOCAL_RANK": "1"}
    done = subprocess.run(["sh", "-c", job.entry[3]], env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout) == ["--epochs", "2", "--dist-url", "env://", "--dist-backend", "gloo",
                                       "--world-size", "4", "--rank", "3"]


def test_an_env_style_script_that_takes_local_rank_gets_it_from_torchruns_environment(tmp_path, studio_home):
    from ddpstudio.core.jobs.job import Shape, cluster_job

    script = tmp_path / "main.py"  # Swin Transformer's main.py declares a required --local_rank
    script.write_text("import argparse, json, sys\nargparse.ArgumentParser().add_argument('--local_rank', type=int)\n"
                      "print(json.dumps(sys.argv[1:]))\n")
    past = _windows_run(studio_home, script=ScriptSpec(path=str(script), args=["--cfg", "swin.yaml"], style="env"))
    assert past.script.local_rank_option == "--local_rank"  # the plan read it from the script
    job = cluster_job(past, Shape(nodes=2, procs_per_node=2), "a test")
    env = {**os.environ, "PATH": VENV_BIN + os.pathsep + os.environ["PATH"], "RANK": "3", "LOCAL_RANK": "1"}
    done = subprocess.run(["sh", "-c", job.entry[3]], env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout) == ["--cfg", "swin.yaml", "--local_rank=1"]
    other = tmp_path / "train.py"
    other.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    plain = _windows_run(studio_home, script=ScriptSpec(path=str(other), args=["--cfg", "swin.yaml"], style="env"))
    assert cluster_job(plain, Shape(nodes=2, procs_per_node=2), "a test").entry == [str(other), "--cfg", "swin.yaml"]


def test_a_spawn_style_script_is_refused_with_the_reason(tmp_path, studio_home, capsys):
    from ddpstudio.cli.main import main

    script = tmp_path / "spawner.py"
    script.write_text("print('hi')\n")
    past = _windows_run(studio_home, script=ScriptSpec(path=str(script), style="spawn",
                                                       dist_args="--world-size 1 --rank 0"))
    assert main(["export-job", "--to", "slurm", past.run_dir]) == 2
    assert "spawn-style script starts its own ranks" in capsys.readouterr().err


def test_skypilot_task_parses_as_json_and_its_run_hands_skypilots_nodes_to_torchrun(tmp_path, studio_home, capsys):
    from torch.distributed.run import get_args_parser

    from ddpstudio.cli.main import main

    assert main(["export-job", "--to", "skypilot", "--nodes", "2", "--gpus-per-node", "4", "--device", "cuda",
                 "--accelerator", "H100", "--port", "29512", *TRAIN]) == 0
    text = capsys.readouterr().out
    task = json.loads("\n".join(line for line in text.splitlines() if not line.startswith("#")))  # YAML 1.2 too
    assert (task["num_nodes"], task["resources"]) == (2, {"accelerators": "H100:4"})

    record, run_dir = tmp_path / "torchrun.jsonl", tmp_path / "run"
    for rank in (0, 1):  # what SkyPilot gives each node's run section
        env = {**os.environ, "PATH": str(STANDINS) + os.pathsep + os.environ["PATH"], "TORCHRUN_RECORD": str(record),
               "SKYPILOT_NODE_IPS": "10.0.0.7\n10.0.0.8", "SKYPILOT_NODE_RANK": str(rank),
               "SKYPILOT_NUM_NODES": "2", "SKYPILOT_NUM_GPUS_PER_NODE": "4", "DDPSTUDIO_RUN_DIR": str(run_dir)}
        done = subprocess.run(["bash", "-c", task["run"]], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(calls) == 2
    for call in calls:
        args = get_args_parser().parse_args(call["argv"])
        assert (args.nnodes, args.nproc_per_node, args.rdzv_endpoint) == ("2", "4", "10.0.0.7:29512")
        assert args.training_script == "ddpstudio.rank.recipe" and call["events_dir"] == str(run_dir / "events")
    plan = json.loads((run_dir / "plan.json").read_text())
    assert (plan["world_size"], plan["backend"], plan["device"]) == (8, "nccl", "cuda")


@pytest.mark.parametrize("restarts", [0, 1])
def test_kubeflow_trainjob_parses_and_its_command_gets_the_runtimes_pet_settings(tmp_path, studio_home, capsys,
                                                                                  monkeypatch, restarts):
    """The pod command under the runtime's PET_* variables, read back by torchrun's own parser. With restarts the
    pods meet by c10d at PET_MASTER_ADDR:PET_MASTER_PORT on a fresh store per round (core/jobs/k8s.py: the static
    rendezvous keeps its first store, and a restart on loopback hung); without, the runtime's static settings."""
    from torch.distributed.run import get_args_parser

    from ddpstudio.cli.main import main

    assert main(["export-job", "--to", "k8s", "--nodes", "3", "--gpus-per-node", "8", "--device", "cuda",
                 "--image", "registry.example/ddp:1", "--max-restarts", str(restarts), *TRAIN]) == 0
    job = json.loads("\n".join(line for line in capsys.readouterr().out.splitlines() if not line.startswith("#")))
    assert (job["apiVersion"], job["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    trainer = job["spec"]["trainer"]
    assert job["spec"]["runtimeRef"] == {"name": "torch-distributed"}
    assert (trainer["numNodes"], trainer["resourcesPerNode"], trainer["image"]) == (
        3, {"limits": {"nvidia.com/gpu": 8}}, "registry.example/ddp:1")
    assert "numProcPerNode" not in trainer  # removed from the Torch API in Trainer v2.2

    record, run_dir = tmp_path / "torchrun.jsonl", tmp_path / "run"
    pets = [{"PET_NNODES": "3", "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": str(node),
             "PET_MASTER_ADDR": "job-node-0-0.job", "PET_MASTER_PORT": "29400"} for node in (1, 0)]
    for pet in pets:  # what the torch-distributed runtime gives each pod
        env = {**os.environ, **pet, "PATH": str(STANDINS) + os.pathsep + os.environ["PATH"],
               "TORCHRUN_RECORD": str(record), "DDPSTUDIO_RUN_DIR": str(run_dir)}
        env.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)
        done = subprocess.run(trainer["command"], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    plan = json.loads((run_dir / "plan.json").read_text())
    assert (plan["world_size"], plan["backend"]) == (24, "nccl")
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(calls) == 2
    for pet, call in zip(pets, calls):
        for key, value in pet.items():  # torchrun's parser takes every option it is not given from PET_<OPTION>
            monkeypatch.setenv(key, value)
        args = get_args_parser().parse_args(call["argv"])
        assert (args.nnodes, args.nproc_per_node, args.node_rank, args.master_addr, args.master_port) == (
            "3", "8", int(pet["PET_NODE_RANK"]), "job-node-0-0.job", 29400)
        assert args.max_restarts == restarts and args.training_script == "ddpstudio.rank.recipe"
        meet = (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id, args.rdzv_conf, call["fresh_store"])
        if restarts:
            is_host = "1" if pet["PET_NODE_RANK"] == "0" else "0"
            assert meet == ("c10d", "job-node-0-0.job:29400", plan["run_id"], f"is_host={is_host}", "1")
        else:
            assert meet == ("static", "", "none", "", None)


def _first(paths: list[Path], wanted, deadline: float) -> protocol.Event:
    """The first event in ``paths`` (ranks' events files, appended to as the ranks run) that ``wanted`` accepts."""
    while time.monotonic() < deadline:
        for path in paths:
            if path.exists():
                parser = protocol.EventParser()
                for line in path.read_text(encoding="utf-8").splitlines():
                    for e in parser.feed(line):
                        if wanted(e):
                            return e
        time.sleep(0.05)
    raise AssertionError(f"no such event in {[p.name for p in paths]} in time")


def _new_rank(agents: list[subprocess.Popen], old: set[int], deadline: float) -> psutil.Process:
    """A rank of the next attempt: a recipe process that an agent started (torchrun's ranks are its own
    children) and that is none of ``old``."""
    while time.monotonic() < deadline:
        for agent in agents:
            try:
                for child in psutil.Process(agent.pid).children():
                    if child.pid not in old and "ddpstudio.rank.recipe" in " ".join(child.cmdline()):
                        return child
            except psutil.Error:
                continue
        time.sleep(0.02)
    raise AssertionError("no rank of a second attempt started in time")


def _outputs(agents: list[subprocess.Popen], deadline: float, events_so_far) -> list[str]:
    """What the agents printed, once they have ended; at the deadline, a failure that says where the ranks
    had got to (the fixture then ends every process of the run)."""
    try:
        return [a.communicate(timeout=max(1.0, deadline - time.monotonic()))[0] for a in agents]
    except subprocess.TimeoutExpired:
        seen = [(rank, e.type, e.get("pid") or e.get("step")) for rank, evs in events_so_far().items()
                for e in evs if e.type in (protocol.RANK_MEETING, protocol.RANK_JOINED, protocol.ERROR, protocol.EVAL)]
        pytest.fail(f"the agents were still running at the deadline; the ranks' events so far: {seen}")


@pytest.mark.slow
@pytest.mark.posix_only("torchrun's elastic agent does not start on Windows wheels (pytorch #148283)")
@pytest.mark.timeout(235)
def test_torchrun_export_restarts_a_killed_rank_once_and_finishes(tmp_path, studio_home, node_agents):
    """``--max-restarts 1`` goes to torchrun: rank 1 killed mid-run, both agents start their ranks again (a new
    group: every rank joins twice, with new pids) and the second attempt trains to the end.

    One rank of the second attempt comes late (held for 3 s once the other has begun to meet, as on a loaded
    node by chance): the early one must not take the killed group's addresses from the rendezvous store
    (core/jobs/shell.py restart_lines; without it the new group never connected and both agents failed)."""
    steps = 10
    job = export(tmp_path / "job.sh", ["--to", "torchrun", "--nodes", "2", "--gpus-per-node", "1", "--host",
                                       "127.0.0.1", "--port", str(find_free_port()), "--max-restarts", "1"],
                 [*TRAIN[:-1], str(steps)])
    assert "--max-restarts 1" in job.read_text()
    run_dir = studio_home / "runs" / "restarted"
    ranks = [run_dir / "events" / f"rank{r}.jsonl" for r in (0, 1)]
    # Rank 1 takes 0.4 s a step (8 samples x 0.05 s): the kill after rank 0's first step lands mid-run.
    nodes = node_agents(job, run_dir, 2, **{SLOW_ENV: "1:0.05"})
    deadline = time.monotonic() + 170  # the run took 63-105 s at load 3-11, about 150 s at load 15-20
    first = {_first([path], lambda e: e.type == protocol.RANK_JOINED, deadline).get("pid") for path in ranks}
    killed = _first(ranks[1:], lambda e: e.type == protocol.RANK_JOINED, deadline).get("pid")
    _first(ranks[:1], lambda e: e.type == protocol.STEP, deadline)
    os.kill(killed, signal.SIGKILL)
    early = _first(ranks, lambda e: e.type == protocol.RANK_MEETING and e.get("pid") not in first, deadline)
    late = _new_rank(nodes, first | {early.get("pid")}, deadline)
    late.suspend()
    try:
        time.sleep(3)  # the early rank goes on into init_process_group, to the store
    finally:
        late.resume()
    outputs = _outputs(nodes, deadline, lambda: rank_events(run_dir))
    assert [n.returncode for n in nodes] == [0, 0], outputs
    for n in nodes:
        assert session_members(n.pid) == []

    events = rank_events(run_dir)
    pids = {rank: [e.get("pid") for e in evs if e.type == protocol.RANK_JOINED] for rank, evs in events.items()}
    assert sorted(pids) == [0, 1] and all(len(p) == 2 and p[0] != p[1] for p in pids.values()), pids
    assert pids[1][0] == killed and late.pid in {pids[0][1], pids[1][1]}
    steps_done = [e.get("step") for e in events[0] if e.type == protocol.GLOBAL_STEP]
    restart_at = steps_done.index(1, 1)  # the second attempt counts from step 1 again
    assert 0 < restart_at < steps and steps_done[restart_at:] == list(range(1, steps + 1)), steps_done
