"""Two machines on this one, over loopback: 'ddpstudio host' + 'ddpstudio join' with real Gloo ranks, the
handshake's refusals before any rank starts, and a joining launcher's SIGKILL stopping the host's ranks.
Two nodes of two ranks training together (the world of four) is read from test_nodes_nolibuv.py's shared run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.cleanup import registry
from ddpstudio.core.nodes import joincode
from ddpstudio.core.nodes.facts import FACTS_OVERRIDE_ENV
from tests.studio import sigint_at

pytestmark = [pytest.mark.slow,
              pytest.mark.posix_only("the loopback adapter is named 'lo', and the tests signal with SIGKILL/SIGINT")]

# The built-in perceptron (these tests are about the nodes, not the model); at lr 0.1 its loss falls within 4 steps.
TRAIN = ["--model", "mlp", "--batch-size", "8", "--image-size", "8", "--lr", "0.1", "--ranks-per-node", "1",
         "--ifname", "lo"]
UNTIL_KILLED = ["--max-steps", "5000", "--epochs", "1000"]  # the perceptron's epoch is 256 steps of a second or two


class Node:
    """One 'ddpstudio host|join --json' process; its stdout read in the background into events."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> None:
        cut = args.index("--") if "--" in args else len(args)  # a script's own arguments come last
        self.proc = subprocess.Popen([*prefix, sys.executable, "-m", "ddpstudio", *args[:cut], "--json", *args[cut:]],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                     env={**os.environ, **(env or {})}, **sigint_at(signal.SIG_DFL))
        self.raw: list[dict] = []
        self.events: list[protocol.Event] = []
        self.stderr = ""
        self._parser = protocol.EventParser()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.raw.append(json.loads(line))
            except ValueError:
                continue
            self.events.extend(self._parser.feed(line))

    def wait_for(self, what: str, check, timeout: float = 120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"waited for {what}; exit {self.proc.poll()}; stderr: {self.finish_stderr()[-2000:]}")

    def code(self) -> str:
        return self.wait_for("the join code", lambda: next((r["code"] for r in self.raw
                                                            if r.get("type") == "join_code"), None), 60)

    def of(self, type_: str) -> list[protocol.Event]:
        return [e for e in self.events if e.type == type_]

    def wait(self, timeout: float = 120) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(10)
        self.finish_stderr()
        return code

    def finish_stderr(self) -> str:
        if self.proc.poll() is not None and not self.stderr:
            self.stderr = self.proc.stderr.read()
        return self.stderr

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _studio(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddpstudio", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def nodes():
    started: list[Node] = []
    yield lambda *args, **kw: started.append(Node(*args, **kw)) or started[-1]
    for node in started:
        node.kill()


def test_wrong_token_and_other_versions_are_refused_before_any_rank_starts(studio_home, nodes):
    host = nodes("host", "--nodes", "2", "--max-steps", "2", "--join-timeout", "120", *TRAIN)
    real = joincode.decode(host.code())
    forged = joincode.encode(joincode.JoinCode(**{**real.__dict__, "token": joincode.new_token()}))
    wrong = nodes("join", forged, "--join-timeout", "30")
    other = nodes("join", joincode.encode(real), "--join-timeout", "30",
                  env={FACTS_OVERRIDE_ENV: json.dumps({"torch": "2.99.0"})})  # the documented test seam
    assert wrong.wait(90) == 2 and other.wait(90) == 2
    assert "wrong token" in wrong.stderr and wrong.stderr.count("ddpstudio: error:") == 1, wrong.stderr
    assert "PyTorch versions differ: this machine has 2.99.0, the host has" in other.stderr, other.stderr
    refusals = host.wait_for("both refusals", lambda: [e.get("message") for e in host.of(protocol.WARNING)
                                                       if "refused" in e.get("message", "")][1:] and
                             [e.get("message") for e in host.of(protocol.WARNING)], 30)
    assert any("wrong token" in m for m in refusals) and any("PyTorch versions differ" in m for m in refusals)
    host.proc.send_signal(signal.SIGINT)  # the host keeps waiting for a good node until stopped (or timed out)
    assert host.wait(30) == 2
    assert "stopped before every node joined; nothing was started" in host.stderr, host.stderr
    for node in (host, wrong, other):  # no rank process ever existed on either side
        assert node.of(protocol.RANK_STARTED) == [] and node.of(protocol.RUN_STARTED) == []
    assert registry.load_records()[0] == []
    assert list((Path(studio_home) / "runs").glob("*")) == []  # the refused runs' folders are gone
    assert real.token not in host.stderr + wrong.stderr + other.stderr


def test_sigkill_of_the_joining_launcher_stops_the_host_within_30_s_naming_the_node(studio_home, nodes):
    host = nodes("host", "--nodes", "2", *UNTIL_KILLED, "--join-timeout", "60", *TRAIN)
    join = nodes("join", host.code(), "--join-timeout", "60")
    host.wait_for("training on both nodes", lambda: len(host.of(protocol.GLOBAL_STEP)) >= 2, 180)
    [started] = join.wait_for("the joining node's run", lambda: join.of(protocol.RUN_STARTED), 30)
    t0 = time.monotonic()
    os.kill(int(started.get("launcher_pid")), signal.SIGKILL)
    assert host.wait(40) == 1
    took = time.monotonic() - t0
    assert took < 30, f"the host stopped {took:.1f} s after the node's launcher was killed"
    [done] = host.of(protocol.RUN_FINISHED)
    assert done.get("state") == protocol.FAILED
    summary = done.get("summary") or ""
    assert summary.startswith("node 1 (") and ", rank 1:" in summary and "heartbeat" in summary, summary
    assert done.get("root_cause", {}).get("node") == 1
    news = [e.get("node_news") for e in host.of(protocol.LOG) if e.get("node") == 1]
    assert news == ["joined", "training", "failed"], news  # what the host's window lists for node 1
    assert join.wait(30) == 1  # its front end says the launcher died; the conftest checks nothing is left
    assert "the launcher ended without reporting a result (killed by SIGKILL)" in join.stderr, join.stderr
    clean = subprocess.run([sys.executable, "-m", "ddpstudio", "clean", "--dry-run", "--json"], capture_output=True,
                           text=True, timeout=60)
    assert json.loads(clean.stdout)["findings"]["empty"], clean.stdout  # nothing stale on either side
    print(f"host stopped {took:.1f} s after SIGKILL of the joining launcher; root cause: {summary}")


def test_sigkill_of_the_host_launcher_stops_the_joining_node_naming_the_host(studio_home, nodes):
    host = nodes("host", "--nodes", "2", *UNTIL_KILLED, "--join-timeout", "60", *TRAIN)
    join = nodes("join", host.code(), "--join-timeout", "60")
    host.wait_for("training on both nodes", lambda: len(host.of(protocol.GLOBAL_STEP)) >= 2, 180)
    [started] = host.of(protocol.RUN_STARTED)
    t0 = time.monotonic()
    os.kill(int(started.get("launcher_pid")), signal.SIGKILL)
    assert join.wait(40) == 1
    took = time.monotonic() - t0
    assert took < 30, f"the joining node stopped {took:.1f} s after the host's launcher was killed"
    [done] = join.of(protocol.RUN_FINISHED)
    summary = done.get("summary") or ""
    assert done.get("state") == protocol.FAILED and summary.startswith("node 0 (") and ", rank 0:" in summary
    assert "connection to the host's store was lost" in summary, summary
    assert host.wait(30) == 1
    print(f"joining node stopped {took:.1f} s after SIGKILL of the host's launcher; root cause: {summary}")


def test_a_joining_machine_killed_outright_leaves_nothing_stale_and_its_record_names_node_and_host(studio_home, nodes):
    """Each node has its own data folder here (as on two machines). The joining node's front end is frozen and its
    launcher killed -9, so nobody records the end: 'ddpstudio clean' there knows the run is dead (its record marked
    with its node rank and the host), no rank of it is left, and it finds nothing stale on either machine."""
    machine_b = Path(studio_home) / "machine-b"
    machine_b.mkdir()
    on_b = {"DDPSTUDIO_HOME": str(machine_b)}
    host = nodes("host", "--nodes", "2", *UNTIL_KILLED, "--join-timeout", "60", *TRAIN)
    code = host.code()
    join = nodes("join", code, "--join-timeout", "60", env=on_b)
    host.wait_for("training on both nodes", lambda: len(host.of(protocol.GLOBAL_STEP)) >= 2, 180)
    [started] = join.wait_for("the joining node's run", lambda: join.of(protocol.RUN_STARTED), 30)
    join.proc.send_signal(signal.SIGSTOP)  # its front end cannot record the end
    os.kill(int(started.get("launcher_pid")), signal.SIGKILL)
    join.kill()
    assert host.wait(40) == 1
    found = json.loads(_studio("clean", "--dry-run", "--json", env=on_b).stdout)["findings"]
    assert found["dead_runs"] == [started.get("run_id")] and found["orphans"] == [] and found["empty"], found
    [record] = _records(machine_b)
    assert (record["run_id"], record["state"], record["nodes"], record["node_rank"]) == \
        (started.get("run_id"), "running", 2, 1), record
    host_id = joincode.decode(code).run_id
    assert record["host_run_id"] == host_id and record["host"].endswith(" (127.0.0.1)"), record
    [host_record] = _records(Path(studio_home))
    assert (host_record["run_id"], host_record["node_rank"], host_record["state"]) == (host_id, 0, "failed")
    found = json.loads(_studio("clean", "--dry-run", "--json").stdout)["findings"]
    assert found["empty"] and found["dead_runs"] == [], found
    listed = _studio("runs", env=on_b).stdout
    assert f"node 1 of 2 machines, host {record['host']}" in listed, listed


def _records(home: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((home / "registry").glob("*.json"))]
