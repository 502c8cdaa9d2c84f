"""What the user sees from a script, through the real CLI: its own output, and its reported steps.

Real 2-rank Gloo runs on the CPU of ``tests/scripts/chatty_ranks.py``: rank 0 prints the DDP example's
"Unable to locate sufficient GPUs", rank 1 a line of its own; with ``--report`` each step is printed
(``loss: X``) and reported through ``ddpstudio.report`` with samples/s, and must count once.
"""

from __future__ import annotations

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.rundir import RunDir
from tests.conftest import processes_of
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

pytestmark = pytest.mark.slow

SCRIPT = str(SCRIPTS / "chatty_ranks.py")
RANK0_SAYS = "Unable to locate sufficient GPUs: training on the CPU instead"
RANK1_SAYS = "rank 1 has its data shard ready"
# chatty_ranks' losses: rank r fits w to (r+1) * [1, -1] with the gradient averaged over both ranks.
LOSSES = {0: [2.0, 0.98, 0.4232, 0.1436], 1: [8.0, 5.78, 4.2632, 3.2156]}


def merged_events(stdout: str) -> list[protocol.Event]:
    """The run's events as ``--json`` would print them, from the run folder the CLI named."""
    [folder] = [line.split("run folder: ", 1)[1] for line in stdout.splitlines() if "run folder: " in line]
    return events(RunDir.at(folder.strip()).merged_events.read_text(encoding="utf-8"))


def run_cli(*args: str):
    res = ddpstudio("run", "--rendezvous-timeout", "60", "--script", SCRIPT, *args, timeout=120)
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    return res


@pytest.fixture(scope="module")
def default_reported(tmp_path_factory):
    """One run, default --show-output, steps printed and reported 0.3 s apart (the printed line is read first)."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DDPSTUDIO_HOME", str(home))
        res = run_cli("--", "--report", "--gap", "0.3")
    assert not processes_of(home)
    return res, merged_events(res.stdout)


def test_default_shows_rank_0s_own_output_only(default_reported):
    res, _ = default_reported
    assert RANK0_SAYS in res.stdout.splitlines()  # as the script printed it, no prefix
    assert "step 3 loss: 0.4232" in res.stdout.splitlines()
    assert RANK1_SAYS not in res.stdout


def test_reported_steps_drive_the_progress_line_with_their_samples_per_s(default_reported):
    res, _ = default_reported
    # The global step: mean loss (2.0 + 8.0) / 2 and mean samples/s (10 + 20) / 2; step 4 of 4 (total_steps).
    assert "step     1  loss 5.0000     15.0 samples/s" in res.stdout
    assert "step     4  loss 1.6796     15.0 samples/s" in res.stdout


def test_a_step_printed_and_reported_counts_once(default_reported):
    _, evs = default_reported
    steps = of_type(evs, protocol.STEP)
    assert not [e for e in steps if e.get("source") == "scraped"], "the printed copies must not count"
    assert {r: [e.get("step") for e in steps if e.rank == r] for r in (0, 1)} == {0: [1, 2, 3, 4], 1: [1, 2, 3, 4]}
    glob = of_type(evs, protocol.GLOBAL_STEP)
    assert [e.get("step") for e in glob] == [1, 2, 3, 4]
    means = [(a + b) / 2 for a, b in zip(LOSSES[0], LOSSES[1])]
    assert [e.get("loss") for e in glob] == pytest.approx(means, abs=1e-3)
    assert {(e.get("ranks"), e.get("samples_per_s"), e.get("total_steps")) for e in glob} == {(2, 15.0, 4)}


def test_show_output_all_prefixes_every_rank_and_scraped_steps_give_the_global_mean(studio_home):
    res = run_cli("--show-output", "all")
    lines = res.stdout.splitlines()
    assert f"[rank 0] {RANK0_SAYS}" in lines and f"[rank 1] {RANK1_SAYS}" in lines
    assert "[rank 1] step 4 loss: 3.2156" in lines
    evs = merged_events(res.stdout)
    scraped = [e for e in of_type(evs, protocol.STEP) if e.get("source") == "scraped"]
    assert sorted((e.rank, e.get("step")) for e in scraped) == [(r, s) for r in (0, 1) for s in (1, 2, 3, 4)]
    glob = of_type(evs, protocol.GLOBAL_STEP)
    assert [e.get("ranks") for e in glob] == [2, 2, 2, 2]
    assert glob[-1].get("loss") == pytest.approx((0.1436 + 3.2156) / 2, abs=1e-3)


def test_show_output_none_shows_no_script_line_and_rank0_only_logging_still_gets_its_curve(studio_home):
    res = run_cli("--show-output", "none", "--", "--rank0-only", "--report")
    assert RANK0_SAYS not in res.stdout and RANK1_SAYS not in res.stdout and "loss: " not in res.stdout
    assert "step     4  loss 0.1436     10.0 samples/s" in res.stdout  # rank 0's own numbers: nobody else reports
    evs = merged_events(res.stdout)
    glob = of_type(evs, protocol.GLOBAL_STEP)
    assert [(e.get("step"), e.get("ranks")) for e in glob] == [(1, 1), (2, 1), (3, 1), (4, 1)]
    assert [e.get("loss") for e in glob] == pytest.approx(LOSSES[0], abs=1e-3)
    assert final(evs).get("state") == "finished"
