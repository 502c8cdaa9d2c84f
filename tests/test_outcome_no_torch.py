"""Issue 23 §2: a run that trained nothing is never a plain success, whether or not its script imported torch.

A wrapper that prints "Unable to locate sufficient 2 gpus ..." and exits 0 before importing anything ends
``not_distributed`` (exit 5) with the ranks' last output, as the same script importing torch does
(tests/test_script_outcomes.py). Real script, 2 ranks, through the real CLI.
"""

from __future__ import annotations

import os

import pytest

from ddpstudio.core import protocol
from tests.conftest import processes_of
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type

SHORTAGE = "Unable to locate sufficient 2 gpus to run this example. Exiting."


@pytest.mark.slow
def test_a_wrapper_that_gives_up_before_importing_torch_is_not_a_distributed_script(studio_home):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "gpu_shortage_no_torch.py"), "--script-style", "env",
                    "--world-size", "2", "--rendezvous-timeout", "60", timeout=120,
                    env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    evs = events(res.stdout)
    done = final(evs)
    assert done.get("state") == protocol.NOT_DISTRIBUTED, (done.data, res.stderr[-2000:])
    assert res.returncode == protocol.EXIT_CODES[protocol.NOT_DISTRIBUTED] == 5
    assert not of_type(evs, protocol.RANK_WATCHED) and not of_type(evs, protocol.RANK_JOINED)
    said = of_type(evs, protocol.RANK_NO_TORCH)
    assert sorted(e.rank for e in said) == [0, 1] and {e.get("source") for e in said} == {"rank helper"}
    assert {e.get("exit_code") for e in of_type(evs, protocol.RANK_EXITED)} == {0}
    assert done.get("summary") == (
        "not a distributed script: the ranks never imported torch, so none initialised a process group (and no "
        f"rank trained a step); all exited 0; rank 0's last output: {SHORTAGE!r}")
    assert done.get("last_output") == {"0": [SHORTAGE], "1": [SHORTAGE]}
    assert not processes_of(studio_home)

