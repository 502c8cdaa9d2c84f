"""Issue 11 §1: scripts that start their own ranks (``--script-style spawn``), run for real.

Two real scripts (tests/scripts): the official DDP tutorial's structure
(``mp.spawn``, MASTER_PORT set inside the script) and the ImageNet example's
(``--multiprocessing-distributed``, rank = node rank x GPUs + GPU). Each runs
once through the CLI with real Gloo on the CPU; one run serves several
assertions. Then a stop mid-run and a busy hard-coded port.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch import spawned
from ddpstudio.core.launch.busyport import busy_port_note, port_in_text
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.rendezvous.ports import find_free_port, port_owner
from ddpstudio.core.hints import CLI, hints_for
from ddpstudio.core.launch.outcome import own_groups_warning
from ddpstudio.core.scriptstyle import StyleSuggestion, suggest_style
from ddpstudio.rank import spawnchild
from tests.conftest import killed_after, processes_of
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

TUTORIAL = str(SCRIPTS / "tutorial_spawn.py")
BLOG = str(SCRIPTS / "blog_spawn.py")
LOSS = re.compile(r"loss: (?P<loss>[\d.]+)|Loss (?P<sci>[\d.e+-]+) ")


def run_in(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, DDPSTUDIO_HOME=str(home), **(env or {}))
    res = ddpstudio("run", "--json", *args, env=full)
    assert not processes_of(home), "a process of the run was left running"
    return res


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    res = run_in(home, "--script", TUTORIAL, env={"TUTORIAL_PORT": str(find_free_port())})
    return res, events(res.stdout)


@pytest.fixture(scope="module")
def blog(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    res = run_in(home, "--script", BLOG, "--", "--multiprocessing-distributed", "--procs-per-node", "2",
                 "--steps", "4")
    return res, events(res.stdout)


def lines_of(evs, rank: int, stream: str) -> list[str]:
    return [e.get("line") for e in of_type(evs, protocol.LOG) if e.rank == rank and e.get("stream") == stream]


def printed_losses(lines: list[str]) -> list[float]:
    found = [LOSS.search(line) for line in lines]
    return [float(m.group("loss") or m.group("sci")) for m in found if m]


# -- the tutorial's structure: mp.spawn, the port set inside the script ------------------------
@pytest.mark.slow
def test_the_tutorial_script_is_started_once_and_runs_in_spawn_style_by_itself(tutorial):
    res, evs = tutorial
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    assert "script style spawn: the script calls mp.spawn() (line 53)" in res.stderr
    started = of_type(evs, protocol.RUN_STARTED)[0]
    assert started.get("script_style") == "spawn" and started.get("world_size") is None  # not known yet
    script = [e for e in of_type(evs, protocol.RANK_STARTED) if not e.get("spawned")]
    assert len(script) == 1 and script[0].rank is None  # one process started by us, not one per rank
    # it declares none of the spawn template's options (mp.spawn's workers get their rank from spawn): none appended
    assert script[0].get("command")[-1].endswith("tutorial_spawn.py")
    assert ("distributed arguments (none): the script declares none of --dist-url, --dist-backend, --world-size, "
            "--rank, and sets up the ranks it starts itself") in started.get("reasons")
    assert final(evs).get("state") == "finished" and final(evs).get("world_size") == 2


@pytest.mark.slow  # reads the module's real tutorial run
def test_every_spawned_child_is_a_rank_with_its_world_size_pid_and_exit(tutorial):
    _, evs = tutorial
    joined = of_type(evs, protocol.RANK_JOINED)
    assert sorted(e.rank for e in joined) == [0, 1] and {e.get("world_size") for e in joined} == {2}
    assert {e.get("source") for e in joined} == {"rank helper"}  # the helper ran in each spawned interpreter
    pids = {e.rank: e.get("pid") for e in joined}
    assert len(set(pids.values())) == 2
    spawned_started = {e.rank: e.get("pid") for e in of_type(evs, protocol.RANK_STARTED) if e.get("spawned")}
    assert spawned_started == pids
    exits = {e.rank: (e.get("exit_code"), e.get("pid")) for e in of_type(evs, protocol.RANK_EXITED) if e.get("spawned")}
    assert exits == {0: (0, pids[0]), 1: (0, pids[1])}


@pytest.mark.slow  # reads the module's real tutorial run
def test_each_childs_output_and_losses_are_its_own_ranks(tutorial):
    _, evs = tutorial
    for rank in (0, 1):
        out, err = lines_of(evs, rank, "stdout"), lines_of(evs, rank, "stderr")
        assert out[0] == f"Running basic DDP example on rank {rank}."  # printed before it joined: kept
        assert [line for line in out[1:] if not line.startswith(f"rank {rank} step ")] == []
        assert err == [f"rank {rank} note on stderr"] * 5
        steps = [e for e in of_type(evs, protocol.STEP) if e.rank == rank]
        assert [e.get("step") for e in steps] == [1, 2, 3, 4, 5]
        # Each step once, seen by the rank helper (its loss tensor's value), not also read from the line
        # that prints it to 4 decimals (rank/steploss.py).
        assert {e.get("source") for e in steps} == {protocol.OBSERVED}
        assert [e.get("loss") for e in steps] == pytest.approx(printed_losses(out), abs=5e-5, rel=0)
    first = {rank: [e.get("loss") for e in of_type(evs, protocol.STEP) if e.rank == rank][0] for rank in (0, 1)}
    assert first[1] > 3 * first[0]  # rank 1 trains towards a target twice as far: one curve each, not merged


@pytest.mark.slow  # reads the module's real tutorial run
def test_the_ranks_steps_give_the_global_mean_once_the_ranks_say_how_many_they_are(tutorial):
    """Spawn style too: the run's curve is the mean over the spawned ranks by step (the world size comes
    from their rank_joined, not from the plan)."""
    _, evs = tutorial
    by_rank = {rank: {e.get("step"): e.get("loss") for e in of_type(evs, protocol.STEP) if e.rank == rank}
               for rank in (0, 1)}
    means = {e.get("step"): e for e in of_type(evs, protocol.GLOBAL_STEP)}
    assert sorted(means) == [1, 2, 3, 4, 5]
    for step, ev in means.items():
        assert ev.get("ranks") == 2 and ev.get("source") == "script"
        assert ev.get("loss") == pytest.approx((by_rank[0][step] + by_rank[1][step]) / 2)


# -- the ImageNet example's structure: --multiprocessing-distributed --------------------------
@pytest.mark.slow
def test_the_blog_script_spawns_its_ranks_with_ranks_from_node_rank_and_gpu(blog):
    res, evs = blog
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    assert "script style spawn: its arguments contain --multiprocessing-distributed" in res.stderr
    [script] = [e for e in of_type(evs, protocol.RANK_STARTED) if not e.get("spawned")]
    assert "--dist-url" in script.get("command") and script.get("command")[-4:] == ["--world-size", "1", "--rank", "0"]
    joined = of_type(evs, protocol.RANK_JOINED)
    assert sorted(e.rank for e in joined) == [0, 1] and {e.get("world_size") for e in joined} == {2}
    for rank in (0, 1):
        assert lines_of(evs, rank, "stdout")[0] == f"Use GPU: {rank} for training"
        steps = [e for e in of_type(evs, protocol.STEP) if e.rank == rank]
        assert len(steps) == 4 and [e.get("loss") for e in steps] == printed_losses(lines_of(evs, rank, "stdout"))
    # w starts at 0: the first loss is the target's squared norm, 14.25 x (rank + 1)^2
    assert [[e.get("loss") for e in of_type(evs, protocol.STEP) if e.rank == r][0] for r in (0, 1)] == [14.25, 57.0]
    assert final(evs).get("state") == "finished" and final(evs).get("world_size") == 2
    from ddpstudio.core.metrics.catalog import entry

    assert entry(Path(final(evs).get("run_dir"))).world_size == 2  # the runs list: the ranks' world size too
    from ddpstudio.core.metrics.history import read_history

    # history.jsonl's header was written before any rank joined: not the plan's one copy (it said 1)
    assert read_history(final(evs).get("run_dir")).header["world_size"] is None


# -- stop, and a busy hard-coded port ---------------------------------------------------------
@pytest.mark.slow
def test_a_stop_mid_run_ends_the_script_and_every_rank_it_spawned(studio_home):
    """The ImageNet structure's spawned ranks stopped while both train. They all-reduce each step by hand, so
    neither DistributedDataParallel's constructor (torch/nn/parallel/distributed.py reads
    ``torch._dynamo.utils.get_optimize_ddp_mode()``) nor an optimizer's first step() imports torch._dynamo:
    2-3 s of CPU less a rank than the tutorial's."""
    cli = subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--json", "--script", BLOG, "--",
                            "--multiprocessing-distributed", "--procs-per-node", "2", "--steps", "100000",
                            "--pause-s", "0.2"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    from ddpstudio.core.metrics.history import read_history
    from ddpstudio.core.metrics.rows import CPU_PCT

    lines, stepping, run_dir = [], set(), None
    try:
        with killed_after(cli, what="ddpstudio run, before both spawned ranks trained with their load sampled"):
            # Until both spawned ranks train and the sampler (once a second) has read each one's load: these
            # ranks step within a second of joining, so the stop could otherwise come before that first reading.
            for line in cli.stdout:
                lines.append(line)
                [ev] = events(line) or [None]
                if ev is not None and ev.type == protocol.RUN_STARTED:
                    run_dir = ev.get("run_dir")
                if ev is not None and ev.type == protocol.STEP:
                    stepping.add(ev.rank)
                if stepping == {0, 1} and read_history(run_dir).keys(CPU_PCT) == [0, 1]:
                    break
        pids = [e.get("pid") for e in of_type(events("".join(lines)), protocol.RANK_JOINED)]
        t0 = time.monotonic()
        RunDir.at(run_dir).stop_file.touch()
        out, _ = cli.communicate(timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        if cli.poll() is None:
            cli.kill()
    print(f"spawn-style stop took {elapsed:.1f} s")
    assert cli.returncode == protocol.EXIT_CODES["stopped"]
    assert final(events(out)).get("state") == "stopped"
    assert elapsed < 10, f"stopping took {elapsed:.1f} s"
    import psutil

    assert len(pids) == 2 and not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                                      for pid in pids)
    # The load of each spawned rank is sampled under its rank (the sampler's first reading after a join).
    assert read_history(run_dir).keys(CPU_PCT) == [0, 1]


@pytest.mark.slow
def test_a_busy_hard_coded_port_is_named_with_the_process_that_holds_it(studio_home):
    holder = socket.socket()
    if sys.platform == "win32":  # else Windows lets the store bind beside it (see core/rendezvous/ports.py)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
    holder.bind(("", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        res = ddpstudio("run", "--json", "--script", TUTORIAL, "--script-style", "spawn",
                        env=dict(os.environ, TUTORIAL_PORT=str(port)))
    finally:
        holder.close()
    assert res.returncode == 1, res.stderr + res.stdout[-3000:]
    done = final(events(res.stdout))
    assert done.get("state") == "failed"
    summary = done.get("summary")
    assert f"port {port} is already in use, held by " in summary and f"(pid {os.getpid()}" in summary, summary
    assert "failed first" in summary and "orphan" not in summary and "left" not in summary.split("(")[0]
    from ddpstudio.core.hints import hints_for

    assert [h.key for h in hints_for(summary)][0] == "held_port"


def test_a_world_size_in_spawn_style_is_refused_before_anything_starts(studio_home):
    res = ddpstudio("run", "--script", TUTORIAL, "--script-style", "spawn", "--world-size", "3")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "ddpstudio: error: a script in spawn style starts its own ranks, so a world size of 3 cannot be applied; "
        "leave out --world-size: the script decides how many processes it starts (in its arguments, or in its "
        "code)"]
    assert not (studio_home / "runs").exists() or not any((studio_home / "runs").iterdir())


# -- the pure parts ---------------------------------------------------------------------------
IMAGENET_MAIN = '''
def main():
    args = parser.parse_args()
    ngpus_per_node = torch.cuda.device_count()
    if args.multiprocessing_distributed:
        # Since we have ngpus_per_node processes per node, the total world_size
        # needs to be adjusted accordingly
        args.world_size = ngpus_per_node * args.world_size
        # Use torch.multiprocessing.spawn to launch distributed processes: the
        # main_worker process function
        mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
    else:
        main_worker(args.gpu, ngpus_per_node, args)
'''
LIGHTNING_LIKE = "import torch.multiprocessing\n\ntorch.multiprocessing.spawn(fit, nprocs=4)\n"
TORCHRUN_SCRIPT = '''"""Launch me with torchrun; do not use mp.spawn(...) here."""
import os
import torch.distributed as dist

# mp.spawn(main, nprocs=2)  # the old way
dist.init_process_group("gloo")
print("spawn", os.environ["RANK"])
'''


def test_the_detector_reads_real_scripts_and_says_why():
    assert suggest_style(IMAGENET_MAIN).why == "the script calls mp.spawn() (line 11): it starts its own ranks"
    assert suggest_style(LIGHTNING_LIKE).why.startswith("the script calls torch.multiprocessing.spawn() (line 3)")
    assert suggest_style("import multiprocessing\nmultiprocessing.spawn(f)\n").style == "spawn"
    # mp.spawn in a docstring and a comment only: no spawn, and the script is torchrun's (env style)
    torchrun = ("env", "the script calls dist.init_process_group() without an init_method (line 6): it joins "
                       "through the environment variables torchrun sets (env://, the default)")
    assert (suggest_style(TORCHRUN_SCRIPT).style, suggest_style(TORCHRUN_SCRIPT).why) == torchrun
    assert suggest_style(TORCHRUN_SCRIPT, ["--epochs", "3"]).style == "env"
    flagged = suggest_style(TORCHRUN_SCRIPT, ["data", "--multiprocessing-distributed"])
    assert flagged.style == "spawn" and "--multiprocessing-distributed" in flagged.why
    assert suggest_style("def broken(:\n    mp.spawn(f, nprocs=2)\n").why.startswith("the script calls mp.spawn() (line 2)")
    assert suggest_style(None) is None


def test_the_busy_port_note_names_a_real_holder_and_says_when_it_cannot():
    text = ("RuntimeError: The server socket has failed to listen on any local network address. port: 12355, "
            "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use")
    assert port_in_text(text) == 12355
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        note = busy_port_note(text.replace("12355", str(port)))
        assert note.startswith(f"port {port} is already in use, held by ") and f"(pid {os.getpid()}" in note
        assert port_owner(port)["pid"] == os.getpid()
    gone = busy_port_note(text, owner_of=lambda _port: None)
    assert "a process that has exited since" in gone
    assert "does not say which port" in busy_port_note("OSError: [Errno 98] Address already in use")
    assert busy_port_note("RuntimeError: connection refused") is None
    # the run's own MASTER_PORT, taken by another process of the run: copies that each start ranks (helper
    # trials: Lightning's ddp_spawn and Ignite's Parallel started once per rank), not a port the script set
    ours = busy_port_note(text, owner_of=lambda _port: None, ours=12355)
    assert ours == ("port 12355, the one DDP Studio chose free for this run's ranks (MASTER_PORT), was taken by "
                    "another process of the run, a process that has exited since (nothing listens there now), so "
                    "more processes than ranks meet there: each copy of the script seems to start ranks of its own")
    assert [h.key for h in hints_for(ours, text, front=CLI)] == ["copies_start_ranks"]
    assert [h.key for h in hints_for(gone, text, front=CLI)] == ["held_port"]


def test_the_rank_side_and_the_launcher_agree_on_the_spawn_names():
    assert (spawnchild.LOGS_ENV, spawnchild.ROOT_ENV, spawnchild.CHILD_ENV, spawnchild.ELASTIC_ENV,
            spawnchild.LAUNCHER_SUFFIX) == (spawned.LOGS_ENV, spawned.ROOT_ENV, spawned.CHILD_ENV, spawned.ELASTIC_ENV,
                                            spawned.LAUNCHER_SUFFIX)


def test_the_cli_progress_says_the_world_size_the_ranks_report():
    import io

    from ddpstudio.cli.progress import ProgressView

    out = io.StringIO()
    view = ProgressView(out=out, tty=False)
    view.feed(protocol.make_event(protocol.RUN_STARTED, run_id="r", world_size=None, backend="gloo", device="cpu",
                                  store="file", run_dir="/r", script_style="spawn"))
    for rank in (0, 1, 1):
        view.feed(protocol.make_event(protocol.RANK_JOINED, rank=rank, world_size=2, pid=10 + rank))
    view.feed(protocol.make_event(protocol.RUN_FINISHED, state="finished", duration_s=3.0, world_size=2))
    assert out.getvalue().splitlines() == [
        "run r: ranks started by the script, gloo on cpu, file store", "  run folder: /r",
        "all 2 ranks joined (world size 2, as the ranks report it)", "run finished after 3.0 s (world size 2)"]


def test_the_windows_command_line_says_the_style_the_cli_would_not_guess():
    from ddpstudio.gui.command_line import run_arguments
    from ddpstudio.gui.form_state import SetupState

    from ddpstudio.core.plan import DEFAULT_SPAWN_ARGS

    spawn = SetupState(workload="script-spawn", script_path=TUTORIAL, world_size=4, dist_args=DEFAULT_SPAWN_ARGS)
    assert run_arguments(spawn) == ["--script", TUTORIAL, "--script-style", "spawn"]  # default template, no ranks
    assert spawn.to_request().world_size is None and spawn.to_request().script.style == "spawn"
    overridden = SetupState(workload="script-args", script_path=TUTORIAL)
    assert run_arguments(overridden) == ["--script", TUTORIAL, "--script-style", "args"]
    plain = SetupState(workload="script-args", script_path=str(SCRIPTS / "args_style.py"))
    assert run_arguments(plain) == ["--script", str(SCRIPTS / "args_style.py")]


@pytest.mark.slow
def test_a_spawned_process_that_fails_unnoticed_still_fails_the_run(studio_home):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "spawn_child_fails.py"), "--script-style", "spawn",
                    "--dist-args", "")
    assert res.returncode == 1, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    done = final(evs)
    assert done.get("state") == "failed" and done.get("world_size") is None  # no rank ever joined
    assert re.fullmatch(r"a process the script started \(pid \d+\) failed with exit code 1: "
                        r"ValueError: boom in a spawned child", done.get("summary")), done.get("summary")
    logged = [(e.rank, e.get("line")) for e in of_type(evs, protocol.LOG) if e.get("pid")]
    assert (None, "child starting") in logged and (None, "ValueError: boom in a spawned child") in logged
    script_lines = [e.get("line") for e in of_type(evs, protocol.LOG) if e.get("stream") == "stdout" and not e.get("pid")]
    assert script_lines == ["parent: child ended with 1, carrying on"]
    [script] = of_type(evs, protocol.RANK_STARTED)
    assert script.get("command")[-1].endswith("spawn_child_fails.py")  # an empty template adds nothing


def test_a_spawned_process_that_fails_before_the_script_is_the_root_cause(studio_home):
    """The script failed because its child did (subprocess.run(check=True) on torchrun, which could not start its
    store: Windows' libuv, under Wine): the child's error is the cause, not the script's CalledProcessError."""
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "spawn_child_fails.py"), "--script-style", "spawn",
                    "--", "--then-fail")
    assert res.returncode == 1, res.stderr + res.stdout[-3000:]
    done = final(events(res.stdout))
    assert re.fullmatch(r"a process the script started \(pid \d+\) failed with exit code 1: "
                        r"ValueError: boom in a spawned child", done.get("summary")), done.get("summary")


def test_the_script_is_planned_once_with_the_node_template_and_no_rank_variables(studio_home):
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.launch.commands import rank_command, rank_env
    from ddpstudio.core.plan import DEFAULT_SPAWN_ARGS, ScriptSpec
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import Request, build_plan

    request = Request(script=ScriptSpec(path=BLOG, args=["--multiprocessing-distributed"], style="spawn",
                                        dist_args=DEFAULT_SPAWN_ARGS))
    plan = build_plan(request, current(), detect_inventory())
    assert plan.world_size == 1 and any("starts its own ranks" in r for r in plan.reasons)
    assert rank_command(plan, 0, "plan.json")[-9:] == [
        "--multiprocessing-distributed", "--dist-url", plan.init_method, "--dist-backend", "gloo",
        "--world-size", "1", "--rank", "0"]
    env = rank_env(plan, 0, "/events", base={"RANK": "5", spawned.CHILD_ENV: "7", spawned.ELASTIC_ENV: "", "PATH": "/bin"})
    assert not {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", spawned.CHILD_ENV,
                spawned.ELASTIC_ENV} & set(env)
    assert env[spawned.LOGS_ENV] == str(RunDir.at(plan.run_dir).logs_dir)
    assert env["PYTHONPATH"].split(os.pathsep)[0].endswith(os.path.join("rank", "helper"))


@pytest.mark.slow
def test_a_spawning_script_that_counts_no_gpus_says_it_started_no_rank_and_why(studio_home):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "spawn_per_gpu.py"))
    done = final(events(res.stdout))
    assert res.returncode == protocol.EXIT_CODES[protocol.NOT_DISTRIBUTED], res.stderr[-3000:]
    assert done.get("summary") == (
        "not a distributed script: it started no processes of its own (spawn style), so no rank joined; it counts "
        "CUDA GPUs to decide how many (torch.cuda.device_count(), line 22), and this machine has none: run it "
        "where there are CUDA GPUs, or make it start its ranks from a number you give it; all exited 0; the "
        "ranks printed nothing")


@pytest.mark.slow
def test_a_script_whose_own_process_trains_as_rank_0_counts_it_as_a_rank(tmp_path):
    """Lightning's and Fabric's launchers start the other ranks and train as rank 0 themselves (helper trial of a
    Fabric script run in spawn style, 2026-12-07): the global curve left rank 0 out (ranks 1 of 2), its output was
    shown as no rank's, and the spawn template's options broke a script whose parser takes none of them."""
    home = tmp_path / "home"
    res = run_in(home, "--script-style", "spawn", "--script", str(SCRIPTS / "launcher_is_rank0.py"), "--",
                 "--steps", "6")
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    evs = events(res.stdout)
    assert final(evs).get("state") == protocol.FINISHED
    [started] = of_type(evs, protocol.RUN_STARTED)
    assert ("distributed arguments (none): without --dist-url, --dist-backend, --world-size, --rank, which the "
            "script does not take") in started.get("reasons")
    for rank in (0, 1):
        assert [e.get("step") for e in of_type(evs, protocol.STEP) if e.rank == rank] == list(range(1, 7))
    assert [(e.get("step"), e.get("ranks")) for e in of_type(evs, protocol.GLOBAL_STEP)] == \
        [(step, 2) for step in range(1, 7)]
    own = [e.get("line") for e in of_type(evs, protocol.LOG) if e.rank == 0 and e.get("stream") == "stdout"]
    assert [line.rsplit(" ", 1)[0] for line in own] == [f"rank 0 step {i} loss" for i in range(6)]


# -- a script that runs torchrun itself (Ultralytics' trainer) -------------------------------------------------
RUNS_TORCHRUN = str(SCRIPTS / "runs_torchrun.py")


def test_a_script_that_runs_a_launcher_itself_is_spawn_style_unless_it_reads_torchruns_variables():
    """Started once per rank, such a script starts a group per copy (helper-free trial, 2026-12-07: args style
    trained two separate 2-rank groups and said "finished (world size 2)")."""
    source = Path(RUNS_TORCHRUN).read_text(encoding="utf-8")
    assert suggest_style(source) == StyleSuggestion(
        "spawn", "the script runs torch.distributed.run itself (line 50): it starts its own ranks")
    assert suggest_style("import os\nos.system('torchrun --nproc-per-node 2 worker.py')\n").why == (
        "the script runs torchrun itself (line 2): it starts its own ranks")
    assert suggest_style("import subprocess as sp\nsp.Popen(['torchrun', '--standalone', 'w.py'])\n").style == "spawn"
    assert suggest_style("import subprocess\nsubprocess.run(['accelerate', 'launch', '--cpu', 't.py'])\n").why == (
        "the script runs accelerate launch itself (line 2): it starts its own ranks")
    assert suggest_style("import os\nos.system(r'C:\\venv\\Scripts\\torchrun.exe --standalone t.py')\n").style == "spawn"
    assert suggest_style("from torch.distributed.launcher.api import elastic_launch\n"
                         "elastic_launch(config, main)()\n").why.startswith(
        "the script runs torch.distributed.launcher.api.elastic_launch() itself (line 2)")
    # a self-launching script that checks whether it is a rank already: env style makes each copy one
    relaunch = ("import os, subprocess, sys\nif 'LOCAL_RANK' not in os.environ:\n"
                "    subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2', __file__])\n")
    assert suggest_style(relaunch).style == "env"
    # words for people are no sign, nor a process started for something else
    words = ('"""Run with torchrun --nproc-per-node 2 this.py"""\nimport argparse, subprocess\n'
             'p = argparse.ArgumentParser(description="torchrun --nproc-per-node 2 this.py")\n'
             'p.add_argument("--x", help="torchrun")\nprint("python -m torch.distributed.run this.py")\n'
             'subprocess.run(["nvidia-smi"])\np.parse_known_args()\n')
    assert suggest_style(words) is None
    assert suggest_style("LAUNCHER = 'torchrun'\n") is None  # a launcher named, no process started
    # Ultralytics' trainer runs torchrun on itself unless LOCAL_RANK is set (ultralytics/engine/trainer.py)
    assert suggest_style("from ultralytics import YOLO\nYOLO('yolo11n.pt').train(device='0,1')\n").why == (
        "the script imports ultralytics (line 1): its distributed set-up reads the variables torchrun sets")


@pytest.mark.slow
@pytest.mark.posix_only("torchrun's own rendezvous makes a TCPStore that asks for libuv, which the Windows wheels lack (seen under Wine: DistStoreError)")
def test_a_script_that_runs_torchrun_itself_is_one_run_whose_ranks_are_torchruns_workers(tmp_path):
    """Spawn style through torchrun's agent: the ranks are the agent's workers (rank/spawnchild.py), not the agent,
    whose workers wrote to files nobody read (rank 1's steps were lost: global steps of 1 rank)."""
    res = run_in(tmp_path / "home", "--script", RUNS_TORCHRUN, "--", "--steps", "5")
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    assert "script style spawn: the script runs torch.distributed.run itself (line 50)" in res.stderr
    evs = events(res.stdout)
    assert final(evs).get("state") == protocol.FINISHED and final(evs).get("world_size") == 2
    joined = of_type(evs, protocol.RANK_JOINED)
    assert sorted(e.rank for e in joined) == [0, 1] and len({e.get("pid") for e in joined}) == 2
    for rank in (0, 1):
        assert [e.get("step") for e in of_type(evs, protocol.STEP) if e.rank == rank] == list(range(1, 6))
        assert [line.split(" loss")[0] for line in lines_of(evs, rank, "stdout")] == [
            f"rank {rank} step {i}/5" for i in range(1, 6)]
    assert [(e.get("step"), e.get("ranks")) for e in of_type(evs, protocol.GLOBAL_STEP)] == [(s, 2) for s in range(1, 6)]
    assert not [e for e in of_type(evs, protocol.LOG) if "before it joined" in (e.get("line") or "")]
    assert not of_type(evs, protocol.WARNING)


@pytest.mark.slow
@pytest.mark.posix_only("torchrun's own rendezvous makes a TCPStore that asks for libuv, which the Windows wheels lack (seen under Wine: DistStoreError)")
def test_copies_of_a_script_that_each_run_torchrun_are_stopped_as_the_cause(tmp_path):
    """Forced to one copy per rank, each copy starts a group of its own: two processes are in a group as rank 0 at
    once. Said, and the run stops with it as the root cause (it trained two groups apart and "finished" before)."""
    res = run_in(tmp_path / "home", "--script-style", "env", "--world-size", "2", "--script", RUNS_TORCHRUN, "--",
                 "--steps", "400")
    assert res.returncode == 1, res.stderr[-3000:] + res.stdout[-3000:]
    evs = events(res.stdout)
    [warning] = of_type(evs, protocol.WARNING)
    message = warning.get("message")
    pids = [int(p) for p in re.search(r"\(pids (\d+), (\d+)\)", message).groups()]
    assert message == own_groups_warning(int(re.match(r"2 processes joined as rank (\d)", message).group(1)), pids)
    assert message.endswith("so separate groups were training, none sharing gradients with the others, and DDP "
                            "Studio stopped the run")
    done = final(evs)
    assert done.get("state") == protocol.FAILED and done.get("summary") == message
    assert [h.key for h in hints_for(done.get("summary"), front=CLI)] == ["copies_start_ranks"]


@pytest.mark.slow
@pytest.mark.posix_only("no fork on Windows")
def test_forked_ranks_are_ranks_of_their_own(tmp_path):
    """Ranks forked from the script's process (Lightning's ddp_fork, Accelerate's notebook_launcher) ran no start-up
    of the helper: they wrote into the script's own files, every line was shown as one rank's (the last to join),
    and the default view hid rank 0's (helper re-test, 2026-12-07). A fork hook makes each a child of its own."""
    res = run_in(tmp_path / "home", "--script", str(SCRIPTS / "fork_ranks.py"), "--show-output", "all")
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    evs = events(res.stdout)
    assert final(evs).get("state") == protocol.FINISHED and final(evs).get("world_size") == 2
    ranks = {e.rank: e.get("pid") for e in of_type(evs, protocol.RANK_STARTED) if e.get("spawned")}
    assert sorted(ranks) == [0, 1] and len(set(ranks.values())) == 2
    for rank in (0, 1):
        lines = lines_of(evs, rank, "stdout")
        assert [line.split(" loss")[0] for line in lines] == [
            f"rank {rank} pid {ranks[rank]} step {s}" for s in range(1, 5)]
        assert [e.get("step") for e in of_type(evs, protocol.STEP) if e.rank == rank] == [1, 2, 3, 4]
    exits = [(e.rank, e.get("exit_code")) for e in of_type(evs, protocol.RANK_EXITED) if e.get("spawned")]
    assert sorted(exits) == [(0, 0), (1, 0)]  # written as the forked process ended in os._exit
    script = [e.get("line") for e in of_type(evs, protocol.LOG) if e.rank is None and e.get("stream") == "stdout"]
    assert script[0].startswith("script pid ") and script[-1] == "script done"
    assert [(e.get("step"), e.get("ranks")) for e in of_type(evs, protocol.GLOBAL_STEP)] == [(s, 2) for s in range(1, 5)]
