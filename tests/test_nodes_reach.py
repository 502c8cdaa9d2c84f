"""How a failed TCP connection to another node is named: refused, dropped (a firewall) or no route."""

from __future__ import annotations

import errno
import socket

from ddpstudio.core.nodes import reach


def test_a_closed_port_is_refused_and_the_message_names_address_and_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nobody listens here once the probe is closed
    failure = reach.check("127.0.0.1", port, 2)
    assert failure is not None and failure.kind is reach.Blocked.REFUSED
    assert failure.explain() == (f"127.0.0.1:{port} refused the TCP connection (Connection refused): nothing "
                                 f"listens on port {port} there, or a firewall rejects it")


def test_an_open_port_is_no_failure():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        assert reach.check(*listening.getsockname()) is None


def test_a_timeout_is_a_drop_and_route_errors_are_no_route_on_linux_and_windows():
    dropped = reach.classify("10.0.0.9", 29500, TimeoutError("timed out"))
    assert dropped.kind is reach.Blocked.DROPPED
    assert dropped.explain() == ("TCP connections to 10.0.0.9:29500 get no answer (timed out): a firewall on that "
                                 "machine or on the way drops them (or a route loses them, or the machine is off)")
    for code in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES, 10065, 10051, 10013):  # 100xx: WSAE* codes
        failure = reach.classify("10.0.0.9", 29500, OSError(code, "blocked here"))
        assert failure.kind is reach.Blocked.NO_ROUTE, code
        assert failure.explain().startswith("TCP connections to 10.0.0.9:29500 are refused by a route or firewall "
                                            "rule (blocked here)")
    assert reach.classify("10.0.0.9", 1, ConnectionRefusedError(10061, "refused")).kind is reach.Blocked.REFUSED
