"""Real runs through the real CLI: two Gloo ranks on the CPU, real stores, real processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.rundir import RunDir
from tests.conftest import PERCEPTRON, SHARED_RUN_STEPS, processes_of, seed_cache
from tests.studio import ENDLESS, SCRIPTS, TINY, ddpstudio, events, final, of_type, sigint_at

pytestmark = pytest.mark.slow


def test_filestore_run_trains_both_ranks_and_loss_falls(shared_run):
    # The built-in perceptron: the recipe's resnet18 default is trained by the demo's test (test_recipe_eval.py).
    res = shared_run.result
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    started = of_type(evs, protocol.RUN_STARTED)[0]
    assert (started.get("backend"), started.get("store"), started.get("world_size")) == ("gloo", "file", 2)
    assert started.get("effective_batch") == 32
    steps = of_type(evs, protocol.STEP)
    assert {e.rank for e in steps} == {0, 1}
    assert max(e.get("step") for e in steps) == SHARED_RUN_STEPS
    losses = [e.get("loss") for e in of_type(evs, protocol.GLOBAL_STEP)]
    assert len(losses) == SHARED_RUN_STEPS
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5, losses
    assert final(evs).get("state") == "finished"
    assert {e.rank: e.get("exit_code") for e in of_type(evs, protocol.RANK_EXITED)} == {0: 0, 1: 0}
    run = RunDir.at(started.get("run_dir"))
    assert run.stdout(1).exists() and run.rank_events(0).exists() and run.merged_events.exists()
    assert run.read_result()["state"] == "finished"
    assert not Path(started.get("store_path")).exists(), "the fresh store file is removed after the run"


@pytest.fixture(scope="module")
def tcp_resume_run(shared_run, tmp_path_factory, warm_cache):
    """One run feeds two tests: the shared FileStore run's checkpoint, resumed for 4 more steps over a TCP store,
    is the TCP store's run and the second half of checkpoint-then-resume (which store each half used does not
    matter to the resume). It resumes a copy: the shared run's folder stays as that run left it."""
    home = seed_cache(tmp_path_factory.mktemp("tcp-home"), warm_cache)
    ckpt = home / "ckpt"
    if shared_run.checkpoint_dir.is_dir():  # else the resume says what is missing, and both tests show it
        shutil.copytree(shared_run.checkpoint_dir, ckpt)
    res = ddpstudio("run", "--json", "--store", "tcp", "--max-steps", str(SHARED_RUN_STEPS + 4), "--checkpoint-dir",
                    str(ckpt), "--resume", *PERCEPTRON, env={**os.environ, "DDPSTUDIO_HOME": str(home)})
    assert not processes_of(home)
    return home, res


def test_tcp_store_run(tcp_resume_run):
    _, res = tcp_resume_run
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    assert of_type(evs, protocol.RUN_STARTED)[0].get("init_method").startswith("tcp://127.0.0.1:")
    assert len(of_type(evs, protocol.GLOBAL_STEP)) == 4
    assert final(evs).get("state") == "finished"


def test_args_style_script_loss_is_read_from_its_output(studio_home):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "args_style.py"), "--", "--steps", "5")
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    scraped = [e for e in of_type(evs, protocol.STEP) if e.get("source") == "scraped"]
    assert {e.rank for e in scraped} == {0, 1}
    rank0 = [e.get("loss") for e in scraped if e.rank == 0]
    assert [e.get("step") for e in scraped if e.rank == 0] == [1, 2, 3, 4, 5]
    assert rank0[0] == pytest.approx(14.25, rel=1e-3) and rank0[-1] < rank0[0]
    command = of_type(evs, protocol.RANK_STARTED)[1].get("command")
    assert command[-8:-6] == ["--dist-url", of_type(evs, protocol.RUN_STARTED)[0].get("init_method")]
    assert command[-2:] == ["--rank", "1"]


def test_env_style_script_loss_is_read_from_its_output(studio_home):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "env_style.py"), "--script-style", "env",
                    "--", "4")
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    assert of_type(evs, protocol.RUN_STARTED)[0].get("init_method") == "env://"
    by_rank = {r: [e.get("step") for e in of_type(evs, protocol.STEP) if e.rank == r] for r in (0, 1)}
    assert by_rank == {0: [1, 2, 3, 4], 1: [1, 2, 3, 4]}
    assert final(evs).get("state") == "finished"


def test_reporter_events_replace_scraping(studio_home):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "reporter_style.py"), "--script-style", "env")
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    steps = of_type(events(res.stdout), protocol.STEP)
    assert len(steps) == 10 and all(e.get("source") is None and e.get("samples_per_s") == 100.0 for e in steps)


def test_checkpoint_then_resume_continues_from_the_saved_step(shared_run, tcp_resume_run):
    first, ckpt = shared_run.result, shared_run.checkpoint_dir
    assert first.returncode == 0, first.stderr + first.stdout[-3000:]
    saved = of_type(events(first.stdout), protocol.CHECKPOINT_SAVED)
    assert [e.get("step") for e in saved] == [SHARED_RUN_STEPS]
    assert sorted(p.name for p in ckpt.iterdir()) == ["checkpoint.json", "checkpoint.pt", "model.pt"]  # no temp file

    home, second = tcp_resume_run
    assert second.returncode == 0, second.stderr + second.stdout[-3000:]
    evs = events(second.stdout)
    assert [e.get("step") for e in of_type(evs, protocol.GLOBAL_STEP)] == [SHARED_RUN_STEPS + s for s in (1, 2, 3, 4)]
    assert any("resumed from" in (e.get("line") or "") for e in of_type(evs, protocol.LOG))
    assert [e.get("step") for e in of_type(evs, protocol.CHECKPOINT_SAVED)] == [SHARED_RUN_STEPS + 4]
    assert not processes_of(home)  # the fixture's home, not this test's


def test_a_crashing_rank_stops_the_other_and_is_the_root_cause(studio_home):
    res = ddpstudio("run", "--json", "--rendezvous-timeout", "30", "--script", str(SCRIPTS / "args_style.py"),
                    "--", "--steps", "500", "--crash-rank", "1", "--crash-step", "2")
    assert res.returncode == 1
    done = final(events(res.stdout))
    assert done.get("state") == "failed"
    cause = done.get("root_cause")
    assert cause["rank"] == 1 and cause["exit_code"] == 1
    assert cause["message"] == "ValueError: boom on rank 1 at step 2"
    assert any("raise ValueError" in line for line in cause["traceback_tail"])
    assert not processes_of(studio_home)


@pytest.mark.posix_only("SIGINT to a child; Windows needs CTRL_C_EVENT and a shared console")
def test_ctrl_c_stops_the_run_and_leaves_nothing(studio_home):
    cli = subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--json", *ENDLESS, *TINY],
                           stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, **sigint_at(signal.SIG_DFL))
    try:
        for line in cli.stdout:  # wait until training really runs
            if '"type":"global_step"' in line:
                break
        t0 = time.monotonic()
        cli.send_signal(signal.SIGINT)
        out, _ = cli.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == protocol.EXIT_CODES["stopped"]
    assert final(events(out)).get("state") == "stopped"
    assert elapsed < 10, f"stopping took {elapsed:.1f} s"
    assert not processes_of(studio_home)


def test_a_stop_file_stops_the_launcher(studio_home):
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.plan import RecipeSpec
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import Request, build_plan, write_plan

    plan = build_plan(Request(recipe=RecipeSpec(model="mlp", image_size=8, batch_size=8, max_steps=100000,
                                                epochs=100000)), current(), detect_inventory())
    path = write_plan(plan)
    launcher = subprocess.Popen([sys.executable, "-m", "ddpstudio.core.launch.launcher", str(path)],
                                stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        for line in launcher.stdout:
            if '"type":"global_step"' in line:
                break
        RunDir.at(plan.run_dir).stop_file.touch()
        out, _ = launcher.communicate(timeout=30)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 3
    assert final(events(out)).get("state") == "stopped"


def test_a_tqdm_bar_is_read_at_every_update_and_a_test_line_is_an_evaluation(studio_home):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "tqdm_style.py"), "--script-style", "env", "--", "8")
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    for rank in (0, 1):
        steps = [e for e in of_type(evs, protocol.STEP) if e.rank == rank]
        assert [e.get("step") for e in steps] == list(range(1, 9))  # each update once, redraws not twice
        losses = [e.get("loss") for e in steps]
        assert losses[-1] < losses[0]
        [ev] = [e for e in of_type(evs, protocol.EVAL) if e.rank == rank]
        assert ev.get("step") == 8 and ev.get("loss") < losses[0] and ev.get("source") == "scraped"
        bar_lines = [e.get("line") for e in of_type(evs, protocol.LOG) if e.rank == rank and "it/s" in e.get("line")]
        assert len(bar_lines) == 1 and "8/8" in bar_lines[0]  # the log keeps the bar's final state only


@pytest.mark.parametrize("how", [pytest.param("stop", marks=pytest.mark.posix_only("SIGINT to a child; Windows needs CTRL_C_EVENT and a shared console")), "finish"])
def test_every_process_of_the_run_ends_even_a_child_that_ignores_sigterm(studio_home, how):
    """Issue 11 §5: a rank's child that ignores SIGTERM (or outlives its finished rank) is ended with the run."""
    import psutil

    args = [sys.executable, "-m", "ddpstudio", "run", "--json", "--script", str(SCRIPTS / "stubborn_child.py"),
            "--script-style", "env", "--", "train" if how == "stop" else "finish"]
    cli = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                           **sigint_at(signal.SIG_DFL))
    lines, children = [], set()
    try:
        for line in cli.stdout:
            lines.append(line)
            if "child pid" in line:
                children.add(int(line.rsplit("child pid", 1)[1].split('"')[0]))
            if how == "stop" and len(children) == 2 and '"step":2' in line:
                cli.send_signal(signal.SIGINT)
        cli.wait(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert len(children) == 2, "".join(lines)[-2000:]
    done = final(events("".join(lines)))
    assert done.get("state") == ("stopped" if how == "stop" else "finished"), done.data
    alive = [pid for pid in children if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"children outlived the run: {alive}"
    assert any("left running" in e.get("line", "") for e in of_type(events("".join(lines)), protocol.LOG)), \
        "the launcher says what it ended"
