"""A user's script over two machines on this one (loopback): 'ddpstudio host --script' + 'ddpstudio join', real
Gloo ranks in args and env style, each rank told its global and local rank; a joining machine without the script
refuses before anything starts; spawn style is refused with its reason. The env-style run of two nodes of two
ranks is shared with the libuv checks in test_nodes_nolibuv.py, which reads torchrun's variables from it."""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.cleanup import registry
from ddpstudio.core.nodes import joincode
from tests.test_nodes_run import TRAIN, _studio, nodes  # noqa: F401 (nodes: the fixture)

pytestmark = [pytest.mark.slow,
              pytest.mark.posix_only("the loopback adapter is named 'lo', and the tests signal with SIGINT")]

SCRIPTS = Path(__file__).parent / "scripts"
NODE = ["--ranks-per-node", "1", "--ifname", "lo", "--join-timeout", "60"]
ARGS_TEMPLATE = "--dist-url {url} --dist-backend {backend} --world-size {world_size} --rank {rank} " \
                "--local-rank {local_rank}"


def _lines(node, pattern: str) -> dict[int, str]:
    """Each rank's first stdout line matching ``pattern`` (the script's own output, as its node reported it)."""
    found: dict[int, str] = {}
    for e in node.of(protocol.LOG):
        if e.get("stream") == "stdout" and re.search(pattern, e.get("line", "")):
            found.setdefault(e.rank, e.get("line"))
    return found


def _finished(node) -> None:
    [done] = node.of(protocol.RUN_FINISHED)
    assert done.get("state") == protocol.FINISHED, done.get("summary")


def test_args_style_script_runs_on_both_machines_with_global_and_local_ranks(studio_home, nodes, tmp_path):
    machine_b = tmp_path / "machine-b"  # its own data folder, as on a second machine
    machine_b.mkdir()
    host = nodes("host", "--nodes", "2", *NODE, "--script", str(SCRIPTS / "args_style.py"), "--script-style", "args",
                 "--dist-args", ARGS_TEMPLATE, "--", "--steps", "5")
    code = host.code()
    assert joincode.decode(code).script["s"] == "args"
    join = nodes("join", code, "--join-timeout", "60", env={"DDPSTUDIO_HOME": str(machine_b)})
    assert host.wait(120) == 0, host.stderr
    assert join.wait(60) == 0, join.stderr
    url = _lines(host, r"^args ")[0].rsplit("url=", 1)[1]
    assert url.startswith("tcp://127.0.0.1:")
    # {local_rank} is the rank's place on its machine: 0 on both nodes (it used to be filled with the global rank).
    assert _lines(host, r"^args ") == {0: f"args rank=0 local_rank=0 world_size=2 url={url}"}
    assert _lines(join, r"^args ") == {1: f"args rank=1 local_rank=0 world_size=2 url={url}"}
    for node, rank in ((host, 0), (join, 1)):
        _finished(node)
        losses = [e.get("loss") for e in node.of(protocol.STEP) if e.rank == rank]
        assert len(losses) == 5 and losses[-1] < losses[0], losses
        [joined] = node.of(protocol.RANK_JOINED)  # the rank helper reports from inside the script on both machines
        assert (joined.rank, joined.get("world_size"), joined.get("source")) == (rank, 2, "rank helper")


def test_a_joining_machine_without_the_script_refuses_before_anything_starts(studio_home, nodes, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(SCRIPTS / "args_style.py", project / "train.py")
    host = nodes("host", "--nodes", "2", *NODE, "--script", str(project / "train.py"), "--", "--steps", "2")
    real = joincode.decode(host.code())
    # The host's script at a path this machine lacks, as a second machine without the project would see it.
    elsewhere = str(tmp_path / "not-here" / "train.py")
    moved = joincode.JoinCode(**{**real.__dict__, "script": {**real.script, "p": elsewhere, "a": elsewhere}})
    result = _studio("join", joincode.encode(moved), "--join-timeout", "30")
    assert result.returncode == 2
    assert result.stderr.count("ddpstudio: error:") == 1 and result.stderr.strip().count("\n") == 0, result.stderr
    assert f"the host's script {elsewhere} is not on this machine: copy it to the same path here; nothing was " \
           "started" in result.stderr, result.stderr
    # The host heard of nobody: it keeps waiting for a good node (here: until stopped), and no rank ever started.
    assert host.of(protocol.WARNING) == []
    host.proc.send_signal(signal.SIGINT)
    assert host.wait(30) == 2
    assert host.of(protocol.RANK_STARTED) == [] and registry.load_records()[0] == []
    assert list((Path(studio_home) / "runs").glob("*")) == []


def test_a_relative_script_is_found_from_the_folder_join_runs_in(tmp_path):
    from ddpstudio.core.nodes import nodescript

    (tmp_path / "b" / "src").mkdir(parents=True)
    (tmp_path / "b" / "src" / "train.py").write_text("print(1)\n")
    ref = nodescript.script_ref("src/train.py", "env", cwd=str(tmp_path / "a"))
    assert ref.absolute == str(tmp_path / "a" / "src" / "train.py")
    assert nodescript.locate(ref, cwd=str(tmp_path / "b")) == str(tmp_path / "b" / "src" / "train.py")
    with pytest.raises(nodescript.ScriptMissing, match=r"run 'ddpstudio join' from the folder that holds "
                                                       r"src/train.py"):
        nodescript.locate(ref, cwd=str(tmp_path / "c"))
    assert nodescript.ScriptRef.from_dict(json.loads(json.dumps(ref.to_dict()))) == ref


def test_spawn_style_is_refused_for_several_machines_with_the_reason(studio_home):
    result = _studio("host", "--nodes", "2", *NODE, "--script", str(SCRIPTS / "tutorial_spawn.py"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ddpstudio: script style spawn:")  # the suggestion, said as on one machine
    assert "ddpstudio: error: --script-style spawn cannot run over several machines" in result.stderr
    assert "MASTER_ADDR=localhost" in result.stderr
    assert list((Path(studio_home) / "runs").glob("*")) == []


def test_the_host_command_the_window_runs_keeps_the_scripts_own_arguments_last():
    """The window's 'Host a multi-machine run' with a script: its options must not land among the script's
    arguments (they used to be appended after '-- ARGS')."""
    from ddpstudio.cli.main import _parser
    from ddpstudio.core.platform import LINUX
    from ddpstudio.gui.form_state import SetupState
    from ddpstudio.gui.node_commands import HostRequest, host_command

    state = SetupState(workload="script-env", script_path=str(SCRIPTS / "ddp_env_style.py"),
                       script_args="4 --show-ranks")
    command = host_command(state, HostRequest(nodes=3, ifname="lo"), LINUX)
    args = _parser().parse_args(command[command.index("host"):])
    assert (args.nodes, args.ifname, args.json, args.stdin_control) == (3, "lo", True, True)
    assert (args.script_style, args.script_args) == ("env", ["4", "--show-ranks"])


def test_stopping_the_host_stops_the_script_ranks_on_both_machines(studio_home, nodes):
    host = nodes("host", "--nodes", "2", *NODE, "--script", str(SCRIPTS / "env_style.py"), "--script-style",
                 "env", "--", "1000000")
    join = nodes("join", host.code(), "--join-timeout", "60")
    for node in (host, join):
        node.wait_for("steps on both machines", lambda n=node: len(n.of(protocol.STEP)) >= 3, 120)
    t0 = time.monotonic()
    host.proc.send_signal(signal.SIGINT)
    assert host.wait(40) == 3, host.stderr
    code = join.wait(40)
    took = time.monotonic() - t0
    [done] = join.of(protocol.RUN_FINISHED)
    # The joining machine hears the host's stop through the store and stops its own script ranks (stop file,
    # then the escalation): a stop, not a failure of its ranks whose peers vanished.
    assert (code, done.get("state")) == (3, protocol.STOPPED), (code, done.get("summary"), join.stderr)
    assert took < 30, f"both machines' ranks ended {took:.1f} s after the host was stopped"
    print(f"script ranks on both machines ended {took:.1f} s after the host's Ctrl+C; joining node: "
          f"{done.get('state')}, {done.get('summary')}")
