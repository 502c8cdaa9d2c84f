"""The global loss for every machine: the host publishes its latest ``global_step`` through the store, the
joining nodes' launchers emit it as their own ``global_step`` events (``source: "host"``).

Only the host's rank 0 computes the global (all-reduced) loss, so without this
a joining machine's window would plot its own ranks only. One key, written at
most every ``EVERY_S`` with the newest step (the plots need the curve, not
every point), read by the others at the same pace: a few small store calls a
second, also on a FileStore on a shared folder.
"""

from __future__ import annotations

import json
import time

from ddpstudio.core import protocol
from ddpstudio.core.nodes import store as keys

GLOBAL_KEY = keys.PREFIX + "global"
EVERY_S = 0.25
SOURCE = "host"  # the global_step events a joining node relays carry source "host"


class Publisher:
    """The host's side: ``note`` every event its launcher emits, ``publish`` from its loop."""

    def __init__(self) -> None:
        self.latest: dict | None = None
        self._sent_step = None
        self._sent_at = 0.0

    def note(self, event: protocol.Event) -> None:
        if event.type == protocol.GLOBAL_STEP and event.get("source") != SOURCE:
            self.latest = {**event.data, "t": event.t}

    def publish(self, store, force: bool = False) -> None:
        """Write the newest step if it changed, at most every ``EVERY_S`` (``force``: now, at the end)."""
        if self.latest is None or self.latest.get("step") == self._sent_step:
            return
        now = time.monotonic()
        if not force and now - self._sent_at < EVERY_S:
            return
        try:
            store.set(GLOBAL_KEY, json.dumps(self.latest))
        except (RuntimeError, OSError):
            return  # the store is gone: the link says so
        self._sent_step, self._sent_at = self.latest.get("step"), now


class Reader:
    """A joining node's side: ``poll`` from its loop gives the host's newest ``global_step`` event, or None."""

    def __init__(self) -> None:
        self.step: float | None = None  # the newest step relayed
        self._read_at = 0.0

    def poll(self, store, force: bool = False) -> protocol.Event | None:
        now = time.monotonic()
        if not force and now - self._read_at < EVERY_S:
            return None
        self._read_at = now
        try:
            if not store.check([GLOBAL_KEY]):
                return None
            data = json.loads(store.get(GLOBAL_KEY))
        except (RuntimeError, OSError, ValueError, UnicodeDecodeError):
            return None
        step = data.get("step") if isinstance(data, dict) else None
        if not isinstance(step, (int, float)) or (self.step is not None and step <= self.step):
            return None
        self.step = step
        t = data.pop("t", None)
        data.pop("type", None)
        return protocol.make_event(protocol.GLOBAL_STEP, t=t if isinstance(t, (int, float)) else None,
                                   **{**data, "source": SOURCE})
