"""What ``ddpstudio host`` and ``ddpstudio join`` share: the adapter from this machine's network,
this machine's label, and running the node launcher through the run command's session loop."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import threading
import time

from ddpstudio.cli.run import EXIT_BAD_INPUT

NODE_LAUNCHER = "ddpstudio.core.nodes.launch"


def add_node_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("machines")
    group.add_argument("--ifname", metavar="ADAPTER",
                       help="the network adapter (name or address) to use instead of the one chosen for you")
    group.add_argument("--join-timeout", type=float, default=300.0, metavar="SECONDS",
                       help="how long the host waits for every node (and a node for the host); default 300")
    # The window's QProcess: a 'stop' line on stdin (or its end) stops the run, as Ctrl+C does in a terminal.
    p.add_argument("--stdin-control", action="store_true", help=argparse.SUPPRESS)


def choose(peers: tuple[str, ...] = (), override: str | None = None):
    """The adapter for this node from psutil's view of the network; raises AdapterError."""
    import psutil

    from ddpstudio.core.nodes.adapter import adapters, choose_adapter

    return choose_adapter(adapters(psutil.net_if_addrs(), psutil.net_if_stats()), peers, override)


def label(address: str) -> str:
    return f"{socket.gethostname()} ({address})"


def launch_node(plan, spec, token: str, args: argparse.Namespace) -> int:
    """Write node.json, start the node launcher (token in its environment only), show the run."""
    from ddpstudio.cli.run import _launch
    from ddpstudio.core.launch.session import Session
    from ddpstudio.core.nodes.nodeplan import TOKEN_ENV

    node_file = spec.write(plan.run_dir)
    session = Session(plan, module=NODE_LAUNCHER, extra=(str(node_file),), env={**os.environ, TOKEN_ENV: token})
    if getattr(args, "stdin_control", False):
        threading.Thread(target=_stop_on_stdin, args=(session,), daemon=True, name="stdin-stop").start()
    code = _launch(plan, args, session=session)
    if code == EXIT_BAD_INPUT:  # refused before any rank: the run folder holds only what we wrote
        shutil.rmtree(plan.run_dir, ignore_errors=True)
    return code


def _stop_on_stdin(session) -> None:
    """Until a 'stop' line or the end of stdin (the window closed it, or died): then stop the run."""
    for line in sys.stdin:
        if line.strip().lower() == "stop":
            break
    while session.proc is None:  # the node launcher is about to start
        time.sleep(0.05)
    session.stop()
