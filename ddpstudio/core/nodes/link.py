"""Heartbeats and news between the nodes of a running multi-machine run, through the host's store.

Each node launcher beats every ``BEAT_S`` and watches the others' beats: its
beat key holds the wall-clock time of its latest beat, in milliseconds by its
own clock (a store ``add`` of the time since the previous one, so one call
sets it). A beat that stops moving for ``STALE_S`` means that node's
launcher is gone (killed -9, crashed, machine or network down). A node whose
ranks fail, or that is stopped, says so at once (its news key), so the
others stop too and name it. A joining node that loses the store has lost
the host. Wall-clock times in the news order failures across nodes (the
earliest is the root cause); the machines' clocks are assumed to agree to
well under a second (NTP).
"""

from __future__ import annotations

import enum
import json
import time
from dataclasses import dataclass

from ddpstudio.core.nodes import store as keys

BEAT_S = 1.0
STALE_S = 10.0  # a missed beat for this long: the node is gone (stop reaches every node well within 30 s)


class NewsKind(enum.StrEnum):
    FAILED = "failed"  # its ranks failed (payload: the root cause)
    STOPPED = "stopped"  # asked to stop (a user, a stop file)
    FINISHED = "finished"
    GONE = "gone"  # no heartbeat, or the store itself is unreachable

    @property
    def state(self) -> "NodeState":
        """How front ends show the node after this news (a node gone is a node failed)."""
        return NodeState(self.value) if self is not NewsKind.GONE else NodeState.FAILED


class NodeState(enum.StrEnum):
    """A node as the others see it: the ``node_news`` of the node launcher's ``log`` events (protocol.md)."""

    WAITING = "waiting"  # not joined yet (front ends only: no event says it)
    JOINED = "joined"
    TRAINING = "training"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class News:
    node: int
    kind: NewsKind
    summary: str
    t: float  # wall-clock time of the event on that node (a node gone: its last beat)
    rank: int | None = None


class NodeLink:
    """One node's end of the link: ``beat()`` and ``poll()`` from the launcher's loop, ``publish`` once."""

    def __init__(self, store, node: int, nodes: int, labels: dict[int, str], stale_s: float = STALE_S) -> None:
        self.store, self.node, self.labels, self.stale_s = store, node, labels, stale_s
        self.others = [n for n in range(nodes) if n != node]
        self._last_beat = 0.0
        self._stamp = 0  # what our beat key holds: the time of our latest beat, ms
        self._seen: dict[int, tuple[int, float, float]] = {}  # node -> (stamp, monotonic, wall) at last change
        self.heard: dict[int, News] = {}
        self.started: set[int] = set()  # nodes whose launcher beats: their ranks have started
        self.lost_store = False
        self._last_ok = time.time()  # the last store call that worked: about when a vanished host died

    def label(self, node: int) -> str:
        return f"node {node} ({self.labels.get(node, '?')})"

    def beat(self) -> None:
        now = time.monotonic()
        if now - self._last_beat >= BEAT_S:
            self._last_beat = now
            step = int(time.time() * 1000) - self._stamp or 1  # it moves every beat
            self._call(self.store.add, keys.beat_key(self.node), step)
            self._stamp += step

    def publish(self, kind: NewsKind, summary: str, t: float, rank: int | None = None) -> None:
        self._call(self.store.set, keys.news_key(self.node),
                   json.dumps({"kind": kind.value, "summary": summary, "t": t, "rank": rank}))

    def poll(self) -> list[News]:
        """What is new about the other nodes since the last call (each node's first news only)."""
        fresh = []
        for node in self.others:
            if node in self.heard:
                continue
            news = self._read_news(node) or self._staleness(node)
            if news is not None:
                self.heard[node] = news
                fresh.append(news)
        return fresh

    def _read_news(self, node: int) -> News | None:
        if not self._call(self.store.check, [keys.news_key(node)]):
            return None
        raw = self._call(self.store.get, keys.news_key(node))
        try:
            d = json.loads(raw)
            return News(node, NewsKind(d["kind"]), str(d.get("summary") or ""), float(d["t"]), d.get("rank"))
        except (ValueError, KeyError, TypeError):
            return None

    def _staleness(self, node: int) -> News | None:
        if self.lost_store:
            return News(node, NewsKind.GONE, "the connection to the host's store was lost: the host's launcher "
                        "was killed or crashed, or the network went away", self._last_ok)
        stamp = self._call(self.store.add, keys.beat_key(node), 0)
        if stamp:
            self.started.add(node)
        now = time.monotonic()
        seen = self._seen.get(node)
        if seen is None or stamp != seen[0]:
            self._seen[node] = (stamp, now, time.time())
            return None
        if now - seen[1] < self.stale_s:
            return None
        # It died after its last beat, so what its death broke here (a rank's "Connection reset by peer")
        # comes later and is no root cause; when we noticed that beat can be seconds later on a busy machine.
        last_alive = min(seen[0] / 1000, seen[2]) if seen[0] else seen[2]
        return News(node, NewsKind.GONE, f"no heartbeat for {now - seen[1]:.0f} s: its launcher was killed or "
                    "crashed, or the machine or the network went away", last_alive)

    def _call(self, method, *args):
        """A store call; when the store is gone (the host died) remember it, and answer 'nothing'."""
        if self.lost_store:
            return 0
        try:
            result = method(*args)
            self._last_ok = time.time()
            return result
        except (RuntimeError, OSError):
            self.lost_store = True
            return 0
