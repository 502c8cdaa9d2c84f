"""Two machines on this one meeting at a FileStore on a shared folder ('ddpstudio host --store-path'), as the
PyTorch-on-Windows blog does: a tmp folder plays the share, each node has its own data folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.cleanup import registry
from ddpstudio.core.nodes import joincode
from tests.test_nodes_run import TRAIN, _studio, nodes  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.posix_only("the loopback adapter is named 'lo'")]


def test_two_nodes_meet_at_a_shared_folder_refuse_a_wrong_token_and_leave_no_store_file(studio_home, nodes,
                                                                                        tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    store = share / "pg"
    on_b = {"DDPSTUDIO_HOME": str(Path(studio_home) / "machine-b")}
    host = nodes("host", "--nodes", "2", "--max-steps", "6", "--join-timeout", "60", "--store-path", str(store),
                 *TRAIN)
    real = joincode.decode(host.code())
    assert (real.store_path, real.port) == (str(store), 0)
    assert (share / "pg.claim").exists()  # claimed like a fixed store path of one machine
    # A wrong token is refused through the file, before any rank starts anywhere.
    forged = nodes("join", joincode.encode(joincode.JoinCode(**{**real.__dict__, "token": joincode.new_token()})),
                   "--join-timeout", "30", env=on_b)
    assert forged.wait(60) == 2
    assert "wrong token" in forged.stderr and forged.stderr.count("ddpstudio: error:") == 1, forged.stderr
    assert forged.of(protocol.RANK_STARTED) == [] and host.of(protocol.RUN_STARTED) == []
    join = nodes("join", joincode.encode(real), "--join-timeout", "60", env=on_b)
    assert host.wait(180) == 0, host.stderr
    assert join.wait(60) == 0, join.stderr
    assert [e.rank for e in host.of(protocol.RANK_STARTED)] == [0]
    assert [e.rank for e in join.of(protocol.RANK_STARTED)] == [1]
    for node, rank in ((host, 0), (join, 1)):
        [started] = node.of(protocol.RUN_STARTED)
        assert (started.get("store"), started.get("init_method"), started.get("world_size")) == \
            ("file", f"file://{store}", 2), started.get("init_method")
        [joined] = node.of(protocol.RANK_JOINED)
        assert (joined.get("global_rank"), joined.get("group_size")) == (rank, 2)
        [done] = node.of(protocol.RUN_FINISHED)
        assert done.get("state") == protocol.FINISHED
    losses = [e.get("loss") for e in host.of(protocol.GLOBAL_STEP) if e.get("source") != "host"]
    assert len(losses) == 6 and losses[-1] < losses[0], losses
    assert [e.get("step") for e in join.of(protocol.STEP)] == list(range(1, 7))
    # The joining node relays the host's global loss (at most 4 a second, the last step always).
    relayed = {e.get("step"): e.get("loss") for e in join.of(protocol.GLOBAL_STEP)}
    assert all(e.get("source") == "host" for e in join.of(protocol.GLOBAL_STEP)) and 6 in relayed, relayed
    assert relayed == {e.get("step"): e.get("loss") for e in host.of(protocol.GLOBAL_STEP) if e.get("step") in relayed}
    # The host follows node 1 through its states (log events of the nodes stream).
    news = [e.get("node_news") for e in host.of(protocol.LOG) if e.get("node") == 1]
    assert news == ["joined", "training", "finished"], news
    assert any("wrong token" in e.get("message", "") for e in host.of(protocol.WARNING))
    # Nothing left in the share (no store file, no claim), nothing stale for 'ddpstudio clean' on either side.
    assert sorted(os.listdir(share)) == []
    for env in (None, on_b):
        found = json.loads(_studio("clean", "--dry-run", "--json", env=env).stdout)["findings"]
        assert found["empty"], found
    assert [r.store_path for r in registry.load_records()[0]] == [str(store)]  # the host's record only has it


def test_a_shared_folder_this_machine_cannot_reach_is_one_clear_error(studio_home, tmp_path):
    code = joincode.encode(joincode.JoinCode(("127.0.0.1",), 0, "20261124-070000-ab12", 2, 1, joincode.new_token(),
                                             store_path=str(tmp_path / "not-mounted" / "pg")))
    result = _studio("join", code, "--ifname", "lo")
    assert result.returncode == 2 and result.stderr.count("ddpstudio: error:") == 1, result.stderr
    assert f"the shared folder {tmp_path / 'not-mounted'} is not reachable from this machine" in result.stderr
    # This machine's own path to the share, in the blog's URL form, is read the way torch reads it.
    result = _studio("join", code, "--ifname", "lo", "--store-path", f"file://{tmp_path}/elsewhere/pg")
    assert result.returncode == 2 and f"the shared folder {tmp_path / 'elsewhere'} is not reachable" in result.stderr
    assert not (Path(studio_home) / "runs").exists() or list((Path(studio_home) / "runs").iterdir()) == []


@pytest.mark.parametrize("extra, says", [
    (["--store-path", "{tmp}/pg", "--port", "29999"], "with --store-path the machines meet at the shared folder's "
                                                      "file: leave --port out"),
    (["--store", "file"], "--store file: a multi-machine run meets at a FileStore on a shared folder only with "
                          "--store-path"),
], ids=["port", "store-file"])
def test_the_host_refuses_store_options_that_do_not_fit_with_one_message(studio_home, tmp_path, extra, says):
    result = _studio("host", "--nodes", "2", *[a.format(tmp=tmp_path) for a in extra], *TRAIN)
    assert result.returncode == 2 and result.stderr.count("ddpstudio: error:") == 1 and says in result.stderr, \
        result.stderr
    assert list(tmp_path.iterdir()) == [] and not (Path(studio_home) / "runs").exists()
