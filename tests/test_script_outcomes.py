"""Issue 11 §2: users' scripts seen from inside (the rank helper) and the honest outcomes they end with.

Each test runs a real script on 2 real Gloo ranks through the real CLI.
"""

from __future__ import annotations

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.rundir import RunDir
from tests.conftest import processes_of
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

pytestmark = pytest.mark.slow


def _run(script: str, *args: str, timeout: str = "60", json: bool = True):
    """One run through the CLI; without --json its events are read back from the run folder."""
    res = ddpstudio("run", *(["--json"] if json else []), "--script", str(SCRIPTS / script),
                    "--script-style", "env", "--rendezvous-timeout", timeout, *args, timeout=120)
    if json:
        return res, events(res.stdout)
    [folder] = [line.split(": ", 1)[1] for line in res.stdout.splitlines() if line.startswith("  run folder: ")]
    return res, events(RunDir.at(folder).merged_events.read_text(encoding="utf-8"))


def test_rank_zero_only_logging_past_the_rendezvous_timeout_finishes(studio_home):
    """Rank 1 never prints, yet it joined: its rank_joined counts, not a first printed loss."""
    # The watchdog looks at timeout + 5 s after the start: 10 + 5 s lets ranks that import torch slowly (a 2-core
    # machine at load 12 took more than 7 s) join before it, and 15.5 s of training after they joined takes
    # the run past it however fast they were.
    res, evs = _run("rank0_logging.py", "--", "15.5", timeout="10")
    done = final(evs)
    assert res.returncode == 0 and done.get("state") == protocol.FINISHED, (done.data, res.stderr[-2000:])
    deadline = of_type(evs, protocol.RUN_STARTED)[0].t + 10 + 5  # the watchdog looks at timeout + 5 s
    assert done.t > deadline, "the run outlived the watchdog's deadline"
    joined = {e.rank: e.t for e in of_type(evs, protocol.RANK_JOINED)}
    assert set(joined) == {0, 1}
    assert {e.rank for e in of_type(evs, protocol.STEP)} == {0}
    assert not of_type(evs, protocol.ERROR)
    # Only a machine so loaded that the ranks joined after the deadline may see the "quiet script" warning.
    assert not of_type(evs, protocol.WARNING) or max(joined.values()) > deadline
    assert not processes_of(studio_home)


def test_a_script_that_gives_up_without_a_process_group_is_not_a_distributed_script(studio_home):
    """PyTorch examples' ddp/example.py without enough GPUs: prints why, exits 0, never inits.
    The CLI names the outcome in one line and shows the ranks' last output."""
    res, evs = _run("gpu_shortage.py", json=False)
    done = final(evs)
    assert done.get("state") == protocol.NOT_DISTRIBUTED, done.data
    assert res.returncode == protocol.EXIT_CODES[protocol.NOT_DISTRIBUTED] == 5
    assert {e.rank for e in of_type(evs, protocol.RANK_WATCHED)} == {0, 1}
    assert not of_type(evs, protocol.RANK_JOINED)
    assert {e.get("exit_code") for e in of_type(evs, protocol.RANK_EXITED)} == {0}
    shortage = "Unable to locate sufficient 2 gpus to run this example. Exiting."
    assert done.get("summary").startswith("not a distributed script: ") and shortage in done.get("summary")
    assert done.get("last_output") == {"0": [shortage], "1": [shortage]}
    result = RunDir.at(done.get("run_dir")).read_result()
    assert (result["state"], result["last_output"]["1"]) == ("not_distributed", [shortage])
    out = res.stdout.splitlines()
    assert len([line for line in out if line.startswith("run not a distributed script after ")]) == 1
    assert any(line.startswith("not a distributed script: the ranks imported torch but none called") for line in out)
    assert "  [rank 1] Unable to locate sufficient 2 gpus to run this example. Exiting." in out


def test_a_script_that_joins_and_exits_without_a_step_finished_but_nothing_trained(studio_home):
    res, evs = _run("no_step.py")
    done = final(evs)
    assert done.get("state") == protocol.NOTHING_TRAINED, done.data
    assert res.returncode == protocol.EXIT_CODES[protocol.NOTHING_TRAINED] == 4
    assert {e.rank for e in of_type(evs, protocol.RANK_JOINED)} == {0, 1}
    assert {e.rank for e in of_type(evs, protocol.RANK_LEFT)} == {0, 1}
    assert not of_type(evs, protocol.STEP)
    assert done.get("summary").startswith("finished, but nothing trained: 2 of 2 rank(s) initialised")
    assert "rank 0's last output: 'rank 0: no data found, nothing to do'" in done.get("summary")
    assert done.get("last_output")["1"] == ["rank 1: model ready, 10 parameters", "rank 1: no data found, nothing to do"]


def test_a_plain_script_on_two_ranks_is_warned_it_trained_two_identical_copies(studio_home):
    res, evs = _run("not_ddp.py", json=False)
    done = final(evs)
    assert done.get("state") == protocol.NOT_DISTRIBUTED and res.returncode == 5, done.data
    assert "each of the 2 ranks trained its own copy" in done.get("summary")
    [warning] = of_type(evs, protocol.WARNING)
    assert warning.get("message").startswith("the script trained 2 identical copies: no rank called "
                                             "torch.distributed.init_process_group")
    assert {e.rank: e.get("step") for e in of_type(evs, protocol.STEP)} == {0: 5, 1: 5}
    assert any(line.startswith("warning: the script trained 2 identical copies") for line in res.stdout.splitlines())
