"""The handshake through the host's store, before any rank starts on any machine.

A joining node takes a ticket, writes its request (token and facts) under
it, and waits for the host's verdict. The host checks the token first (in
constant time), then the facts (:func:`facts.mismatch`), and answers each
ticket; once every node is in, it writes the start record (the shared plan)
that all nodes start their ranks from. A refused node starts nothing; the
host keeps waiting for a good one until its join timeout.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Callable

from ddpstudio.core.nodes import reach
from ddpstudio.core.nodes import store as keys
from ddpstudio.core.nodes.facts import NodeFacts, mismatch

POLL_S = 0.1


class Refused(Exception):
    """This node may not join (or the host gave up); the message says why, for the user.

    ``blocked``: the host could not connect back to this node (a firewall here, most likely).
    """

    def __init__(self, message: str, blocked: bool = False) -> None:
        super().__init__(message)
        self.blocked = blocked


@dataclass(frozen=True)
class Joined:
    node_rank: int
    label: str  # "hostname (address)": how messages name the node


def judge(expected_token: str, host: NodeFacts, request: dict) -> str | None:
    """Why the request is refused, or None: the token first, then the facts."""
    token = str(request.get("token", ""))
    if not secrets.compare_digest(token.encode("utf-8"), expected_token.encode("utf-8")):
        return "wrong token: the code does not belong to this run; copy the current code from the host again"
    try:
        facts = NodeFacts.from_dict(request["facts"])
    except (KeyError, TypeError, ValueError):
        return "the joining node sent an unreadable request (a different DDP Studio version?)"
    return mismatch(host, facts)


def reach_back(address: str, port: int, timeout_s: float = 3.0) -> str | None:
    """Why the host cannot open a TCP connection to a joining node's probe socket, or None.

    Gloo connects ranks in both directions; the store connection proved only
    node -> host. The probe listens in the joining node's own Python, so a
    firewall that blocks that program's incoming connections blocks this too.
    """
    failure = reach.check(address, port, timeout_s)
    if failure is None:
        return None
    how = {reach.Blocked.DROPPED: ": dropped, as a firewall does",
           reach.Blocked.NO_ROUTE: ": a route or firewall rule refuses it"}.get(failure.kind, "")
    return (f"the host cannot open a TCP connection to this machine at {address}:{port} "
            f"({failure.detail}{how}): Gloo connects in both directions, so allow incoming connections "
            "for DDP Studio's Python in this machine's firewall (docs/multi-machine.md)")


def host_wait(store, token: str, host: NodeFacts, timeout_s: float, stopped: Callable[[], bool],
              say: Callable[[str, str], None], reach: Callable[[str, int], str | None] = reach_back,
              on_joined: Callable[[Joined], None] | None = None) -> list[Joined]:
    """Answer join requests until ``host.nodes - 1`` nodes are in; raises :class:`Refused` on timeout or stop.

    ``say(kind, line)`` reports progress (kind: "joined" or "refused"); it never sees the token.
    ``on_joined(node)``, when given, reports each node that joined instead of ``say("joined", ...)``.
    ``reach(address, port)``: the connection check back to a node that passed the token and the facts.
    """
    store.set(keys.HOST_KEY, json.dumps({"facts": host.to_dict()}))
    wanted, joined, ticket = host.nodes - 1, [], 1
    deadline = time.monotonic() + timeout_s
    while len(joined) < wanted:
        if stopped():
            _cancel(store, "the host was stopped before every node joined")
            raise Refused("stopped before every node joined; nothing was started")
        if time.monotonic() >= deadline:
            got = f"only {len(joined)} of {wanted} nodes joined" if joined else "nobody joined"
            _cancel(store, f"{got} within the host's {timeout_s:g} s")
            raise Refused(f"{got} within {timeout_s:g} s; nothing was started. Run 'ddpstudio join CODE' on the "
                          "other machines sooner, or give them longer with --join-timeout")
        if not store.check([keys.join_key(ticket)]):
            time.sleep(POLL_S)
            continue
        request = _json(store.get(keys.join_key(ticket)))
        label = str(request.get("label") or "an unnamed machine")
        reason = judge(token, host, request)
        probe = request.get("probe")
        blocked = False
        if reason is None and isinstance(probe, list) and len(probe) == 2:
            reason = reach(str(probe[0]), int(probe[1]))
            blocked = reason is not None
        if reason is None:
            joined.append(Joined(len(joined) + 1, label))
            store.set(keys.verdict_key(ticket), json.dumps({"ok": True, "node_rank": len(joined)}))
            on_joined(joined[-1]) if on_joined else say("joined", f"node {len(joined)} joined: {label}")
        else:
            store.set(keys.verdict_key(ticket), json.dumps({"ok": False, "reason": reason, "blocked": blocked}))
            say("refused", f"refused a join from {label}: {reason}")
        ticket += 1
    return joined


def host_start(store, shared_plan: dict, joined: list[Joined], host_label: str) -> None:
    labels = {"0": host_label, **{str(j.node_rank): j.label for j in joined}}
    store.set(keys.START_KEY, json.dumps({"plan": shared_plan, "labels": labels}))


def _cancel(store, reason: str) -> None:
    store.set(keys.START_KEY, json.dumps({"cancelled": reason}))


def join(store, token: str, facts: NodeFacts, label: str, timeout_s: float,
         probe: tuple[str, int] | None = None, stopped: Callable[[], bool] = lambda: False) -> tuple[int, dict]:
    """This node's request (``label``: "hostname (address)"; ``probe``: a socket listening here, for
    :func:`reach_back`); returns (node rank, the start record) or raises :class:`Refused`."""
    ticket = int(store.add(keys.TICKETS_KEY, 1))
    request = {"token": token, "facts": facts.to_dict(), "label": label}
    if probe is not None:
        request["probe"] = list(probe)
    store.set(keys.join_key(ticket), json.dumps(request))
    key = _first_of(store, [keys.verdict_key(ticket), keys.START_KEY], timeout_s, "answer the join request",
                    stopped)
    if key == keys.START_KEY and not store.check([keys.verdict_key(ticket)]):
        late = _json(store.get(keys.START_KEY))
        raise Refused(f"the host gave up: {late['cancelled']}; nothing was started" if "cancelled" in late else
                      "the run already has all its nodes (it started without this one); nothing was started")
    verdict = _json(store.get(keys.verdict_key(ticket)))
    if not verdict.get("ok"):
        raise Refused(f"the host refused this node: {verdict.get('reason', 'no reason given')}; nothing was started",
                      blocked=bool(verdict.get("blocked")))
    _first_of(store, [keys.START_KEY], timeout_s, "start the run", stopped)
    start = _json(store.get(keys.START_KEY))
    if "cancelled" in start:
        raise Refused(f"the host gave up: {start['cancelled']}; nothing was started")
    return int(verdict["node_rank"]), start


def _first_of(store, wanted: list[str], timeout_s: float, what: str, stopped: Callable[[], bool]) -> str:
    """The first of ``wanted`` keys to exist (a late node sees the host's cancellation, not a timeout)."""
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if stopped():
                raise Refused(f"stopped while waiting for the host to {what}; nothing was started")
            for key in wanted:
                if store.check([key]):
                    return key
            if time.monotonic() >= deadline:
                raise Refused(f"the host did not {what} within {timeout_s:g} s; nothing was started")
            time.sleep(POLL_S)
    except (RuntimeError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Refused(f"lost the connection to the host before it would {what} ({first}); nothing was started") \
            from None


def _json(raw: bytes) -> dict:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}
