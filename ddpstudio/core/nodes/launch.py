"""The node launcher: ``python -m ddpstudio.core.nodes.launch PLAN.json NODE.json [--stdin-control]``.

The launcher of :mod:`ddpstudio.core.launch.launcher`, with the handshake
before it and the link to the other nodes around it. The host opens the
TCPStore and waits for the nodes; a joining node connects and asks to join.
No rank starts on any machine until every node is in. While the run lasts,
each node beats and listens (:mod:`link`): a node that fails, is stopped or
goes silent stops every node, and the root cause names it. Exit status as the
launcher's: 0 finished, 1 failed, 3 stopped, 2 refused (nothing started).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import time

from ddpstudio.core import protocol
from ddpstudio.core.launch.launcher import Launcher, listen_for_stop, refuse, run
from ddpstudio.core.launch.planfile import PlanError, read_plan
from ddpstudio.core.launch.rootcause import RankFailure
from ddpstudio.core.nodes import firewall, handshake, relay, sharedstore
from ddpstudio.core.nodes.facts import local_facts
from ddpstudio.core.nodes.link import News, NewsKind, NodeLink, NodeState
from ddpstudio.core.nodes.nodeplan import (TOKEN_ENV, NodeRole, NodeSpec, joined_plan, shared_part,
                                           with_local_script)
from ddpstudio.core.nodes.store import StoreError, connect, open_host_store
from ddpstudio.core.plan import Plan

NODES_STREAM = "nodes"  # log events about the nodes carry this stream
LAST_GLOBAL_S = 3.0


def _span(ranks: range) -> str:
    return f"rank {ranks.start}" if len(ranks) == 1 else f"ranks {ranks.start}-{ranks.stop - 1}"


class NodeFailure(RankFailure):
    """Another node's failure (or disappearance), as this node's root cause."""

    def __init__(self, news: News, label: str, ranks: range) -> None:
        span = _span(ranks)
        super().__init__(news.rank if news.rank is not None else ranks.start, None, news.t, news.summary)
        self.node, self.label = news.node, f"{label}, {span}"

    def summary(self) -> str:
        return f"{self.label}: {self.message}"

    def to_dict(self) -> dict:
        return {**super().to_dict(), "node": self.node, "node_label": self.label}


class NodeLauncher(Launcher):
    def __init__(self, plan: Plan, spec: NodeSpec, **kwargs) -> None:
        self.publisher, self.reader = relay.Publisher(), relay.Reader()  # before the launcher's first emit
        self._last_step = 0  # the newest step this node's ranks reported
        self._training: set[int] = set()  # other nodes already announced as training
        super().__init__(plan, **kwargs)
        self.spec = spec
        self.store = None
        self.link: NodeLink | None = None
        self._published = False
        self.host_label = spec.label if spec.role is NodeRole.HOST else spec.address
        self.host_run_id = plan.run_id if spec.role is NodeRole.HOST else spec.host_run_id

    # -- before any rank -----------------------------------------------------
    def rendezvous(self, token: str) -> None:
        """Open (host) or reach (join) the store and complete the handshake; raises handshake.Refused/StoreError."""
        spec = self.spec
        facts = local_facts(self.platform, self.plan.backend, spec.nodes, spec.ranks_per_node)
        if spec.role is NodeRole.HOST:
            self.store = sharedstore.open_store(spec.store_path) if spec.store_path else \
                open_host_store(spec.address, spec.port, self.platform)
            self._say(f"waiting up to {spec.join_timeout:g} s for {spec.nodes - 1} node(s) to join at "
                      + (f"the store file {spec.store_path}" if spec.store_path else f"{spec.address}:{spec.port}"))
            joined = handshake.host_wait(self.store, token, facts, spec.join_timeout, self.stop_requested.is_set,
                                         lambda kind, line: self._say(line, warn=kind == "refused", news=kind),
                                         on_joined=lambda j: self._say(f"node {j.node_rank} joined: {j.label}",
                                                                       news=NodeState.JOINED, node=j.node_rank,
                                                                       label=j.label))
            handshake.host_start(self.store, shared_part(self.plan), joined, spec.label)
            labels = {0: spec.label, **{j.node_rank: j.label for j in joined}}
        else:
            self.store = sharedstore.connect(spec.store_path, spec.join_timeout, self.stop_requested.is_set) \
                if spec.store_path else connect(spec.address, spec.port, spec.join_timeout, self.stop_requested.is_set)
            with _probe_socket(spec.own_address) as probe:
                node_rank, start = handshake.join(self.store, token, facts, spec.label, spec.join_timeout,
                                                  probe.getsockname()[:2] if probe else None,
                                                  self.stop_requested.is_set)
            self.plan = with_local_script(joined_plan(self.plan, start["plan"], node_rank, _has_cuda(start["plan"])),
                                          spec.script_path, self.platform)
            if self.plan.script is not None and not spec.script_path:
                raise handshake.Refused("the host runs a script, and this node was not told where it lies here "
                                        "(a join code from an older DDP Studio?); nothing was started")
            if spec.store_path:
                self.plan = sharedstore.joined_on_folder(self.plan, spec.store_path, self.platform)
            labels = {int(k): v for k, v in start.get("labels", {}).items()}
            self._say(f"joined as node {node_rank} of {spec.nodes}: {_span(self.plan.local_ranks())} of "
                      f"{self.plan.world_size}")
            self.host_run_id = str(start["plan"].get("host_run_id") or spec.host_run_id)
        self.host_label = labels.get(0, spec.address)
        self.link = NodeLink(self.store, self.plan.node_rank, spec.nodes, labels)

    def record_fields(self) -> dict:
        """This machine's record of the run: its node rank, the host and the host's run id (one run on all)."""
        return {"nodes": self.spec.nodes, "node_rank": self.plan.node_rank, "host": self.host_label,
                "host_run_id": self.host_run_id}

    def _say(self, line: str, warn: bool = False, news: str = "", node: int | None = None, label: str = "") -> None:
        """``news``: a node's new state (:class:`NodeState`; "refused" for a refused join), with ``node`` (its
        node rank) and ``label``, so a front end can follow each node without reading the line."""
        if warn:
            self.emit(protocol.make_event(protocol.WARNING, message=line))
        else:
            about = {"node": node, "node_label": label} if node is not None else {}
            self.emit(protocol.make_event(protocol.LOG, stream=NODES_STREAM, line=line,
                                          **({"node_news": str(news), **about} if news else {})))

    def emit(self, event: protocol.Event) -> None:
        super().emit(event)
        self.publisher.note(event)  # the host's global loss, for the joining nodes (relay)
        if event.type == protocol.STEP and isinstance(event.get("step"), int):
            self._last_step = max(self._last_step, event.get("step"))

    # -- while the ranks run (hooks of the launcher's loop) ---------------------
    def _local_failures(self) -> list[RankFailure]:
        return [f for f in self.failures if not isinstance(f, NodeFailure)]

    def _tick(self) -> None:
        if self.link is None:
            return
        self.link.beat()
        local = self._local_failures()
        if not self._published and local:
            first = min(local, key=lambda f: f.t)
            self.link.publish(NewsKind.FAILED, first.summary(), first.t, first.rank if first.rank >= 0 else None)
            self._published = True
        elif not self._published and self.stop_requested.is_set() and not self._stopped_by_others():
            self.link.publish(NewsKind.STOPPED, self.stop_reason, time.time())
            self._published = True
        for news in self.link.poll():
            self._hear(news)
        for node in sorted(self.link.started - self._training - set(self.link.heard)):
            self._training.add(node)
            self._say(f"{self.link.label(node)} is training", news=NodeState.TRAINING, node=node,
                      label=self.link.labels.get(node, ""))
        if self.spec.role is NodeRole.HOST:
            self.publisher.publish(self.store)
        else:
            self._relay()

    def _relay(self, force: bool = False) -> None:
        event = self.reader.poll(self.store, force)
        if event is not None:
            self.emit(event)

    def _stopped_by_others(self) -> bool:
        return bool(self.link and any(n.kind is not NewsKind.FINISHED for n in self.link.heard.values()))

    def _node_ranks(self, node: int) -> range:
        k = self.plan.ranks_per_node
        return range(node * k, (node + 1) * k)

    def _hear(self, news: News) -> None:
        label = self.link.label(news.node) if self.link else f"node {news.node}"
        about = {"news": news.kind.state, "node": news.node,
                 "label": self.link.labels.get(news.node, "") if self.link else ""}
        if news.kind is NewsKind.FINISHED:
            self._say(f"{label} finished", **about)
            return
        if self.ranks and all(r.exit_code == 0 for r in self.ranks):
            self._say(f"{label}: {news.summary} (after this node's ranks had finished)", **about)
            return
        if news.kind is NewsKind.STOPPED:
            self._say(f"{label} was stopped ({news.summary}): stopping this node too", **about)
            self.request_stop(f"{label} was stopped ({news.summary})")
            return
        self._say(f"{label} failed: {news.summary}", **about)
        failure = NodeFailure(news, label, self._node_ranks(news.node))
        self.emit(protocol.make_event(protocol.ERROR, message=failure.summary()))
        self.failures.append(failure)

    def _settle(self) -> None:
        """Before the run's end: the host relays its last step and hears how every node ended; a node whose ranks
        failed hears from every other node (or sees it go silent) before naming a root cause."""
        if self.link is None:
            return
        self._tick()
        if self.spec.role is NodeRole.HOST:
            self.publisher.publish(self.store, force=True)  # the last step, before the others end
        elif self.ranks and all(r.exit_code == 0 for r in self.ranks):
            self._await_last_global()
        if self._local_failures() or self.spec.role is NodeRole.HOST:
            # The host's run ends with how every node ended (each says it as its own run ends, about when
            # the host's ranks do), so its window shows every node's last state before "finished".
            deadline = time.monotonic() + self.link.stale_s + 2.0
            while time.monotonic() < deadline and len(self.link.heard) < len(self.link.others):
                time.sleep(0.2)
                self._tick()
        stops = [n for n in self.link.heard.values() if n.kind is NewsKind.STOPPED]
        if stops:
            # Ranks that failed after another node was stopped failed of that stop (their peers vanished).
            first = min(n.t for n in stops)
            self.failures = [f for f in self.failures if isinstance(f, NodeFailure) or f.t < first]

    def _await_last_global(self) -> None:
        """Our ranks finished: relay the host's global loss up to our last step (it publishes it as its ranks
        end, about when ours do), for at most ``LAST_GLOBAL_S``."""
        deadline = time.monotonic() + LAST_GLOBAL_S
        while (self.reader.step or 0) < self._last_step and time.monotonic() < deadline and not self.link.lost_store:
            self._relay(force=True)
            time.sleep(0.1)

    # -- after -----------------------------------------------------------------
    def farewell(self) -> None:
        """Say how this node ended; the host keeps the store up until every node has said so (or is gone)."""
        if self.link is None:
            return
        if not self._published:
            kinds = {protocol.FINISHED: NewsKind.FINISHED, protocol.STOPPED: NewsKind.STOPPED}
            self.link.publish(kinds.get(self.state.value, NewsKind.FAILED), self.stop_reason or self.state.value,
                              time.time())
        if self.spec.role is NodeRole.HOST:
            deadline = time.monotonic() + self.link.stale_s + 2.0
            while time.monotonic() < deadline and len(self.link.heard) < len(self.link.others):
                self.link.beat()
                self.link.poll()
                time.sleep(0.2)


@contextlib.contextmanager
def _probe_socket(address: str):
    """A socket listening on this node's address while the host checks it can connect here."""
    if not address:
        yield None
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((address, 0))
        sock.listen(4)  # the kernel completes the host's connection; nothing needs to accept it
        yield sock
    finally:
        sock.close()


def _has_cuda(shared: dict) -> bool:
    """Whether this node trains on its GPUs: only when the host does and this machine has some
    (asked here, where torch is loaded anyway, so 'ddpstudio join' itself starts fast)."""
    if shared.get("device_hint") != "cuda":
        return False
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddpstudio.core.nodes.launch")
    parser.add_argument("plan")
    parser.add_argument("node", help="the node.json a front end wrote beside the plan")
    parser.add_argument("--stdin-control", action="store_true")
    args = parser.parse_args(argv)
    token = os.environ.pop(TOKEN_ENV, "")  # not for the ranks
    try:
        spec = NodeSpec.read(args.node)
        # A joining node's plan gets its workload from the host (handshake.join): nothing to check yet.
        plan = read_plan(args.plan) if spec.role is NodeRole.HOST else Plan.read(args.plan)
    except (PlanError, OSError, ValueError, TypeError, KeyError) as exc:
        return refuse(f"{exc}; the node launcher started nothing")
    launcher = NodeLauncher(plan, spec)
    listen_for_stop(launcher, args.stdin_control)
    try:
        return _run_node(launcher, spec, token)
    finally:
        launcher.link = launcher.store = None  # clients let go of the store before the host's closes
        if spec.store_path and spec.role is NodeRole.HOST:
            sharedstore.remove(spec.store_path)  # the host owns the shared file: none is left for the next run


def _run_node(launcher: NodeLauncher, spec: NodeSpec, token: str) -> int:
    try:
        launcher.rendezvous(token)
    except (handshake.Refused, StoreError) as exc:
        code = refuse(str(exc))
        advice = firewall.advice_after(exc, launcher.platform, spec.port)  # Windows, a firewall the likely cause
        if advice:
            print(advice, file=sys.stderr, flush=True)
        return code
    except (RuntimeError, OSError, KeyError, ValueError) as exc:  # the host vanished mid-handshake, say
        return refuse(f"the handshake with the host failed ({type(exc).__name__}: {exc}); nothing was started")
    code = run(launcher)
    launcher.farewell()
    return code


if __name__ == "__main__":
    sys.exit(main())
