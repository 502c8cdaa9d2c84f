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

    from ddpstudio.core.nodes.adapter import adapters, choose_adapter, with_entries

    addrs = psutil.net_if_addrs()
    return with_entries(choose_adapter(adapters(addrs, psutil.net_if_stats()), peers, override), addrs)


def label(address: str) -> str:
    return f"{socket.gethostname()} ({address})"


def launch_node(plan, spec, token: str, args: argparse.Namespace) -> int:
    """Write node.json, start the node launcher (token in its environment only), show the run."""
    from ddpstudio.cli.run import _launch
    from ddpstudio.core.launch.session import Session
    from ddpstudio.core.nodes.nodeplan import TOKEN_ENV
    from ddpstudio.core.platform import current

    # Asked on a terminal only (not with --json, nor when the code came on stdin: 'join -').
    interactive = not args.json and sys.stdin.isatty() and getattr(args, "code", "") != "-"
    offer_firewall_rules(current(), spec.port, interactive)
    node_file = spec.write(plan.run_dir)
    session = Session(plan, module=NODE_LAUNCHER, extra=(str(node_file),), env={**os.environ, TOKEN_ENV: token})
    if getattr(args, "stdin_control", False):
        threading.Thread(target=_stop_on_stdin, args=(session,), daemon=True, name="stdin-stop").start()
    code = _launch(plan, args, session=session)
    if code == EXIT_BAD_INPUT:  # refused before any rank: the run folder holds only what we wrote
        shutil.rmtree(plan.run_dir, ignore_errors=True)
    return code


def offer_firewall_rules(platform, port: int, interactive: bool, programs: list[str] | None = None, *,
                         present=None, add=None, ask=input, out=None, profiles: tuple[str, ...] | None = None) -> None:
    """Windows, the first multi-machine run here on a network of this firewall profile: offer to add inbound
    rules for this install's Pythons (one administrator prompt); when declined, not interactive or failed,
    print exactly what to allow. Asked once per data folder and profile (a marker file), and not at all when
    the rules are there already. ``profiles``: the active ones (default: read, ``firewall.active_profiles``)."""
    from ddpstudio.core import paths
    from ddpstudio.core.nodes import firewall

    if not platform.is_windows:
        return
    out = out or sys.stderr
    marker = paths.data_dir() / firewall.OFFERED_FILE
    profiles = firewall.active_profiles(platform) if profiles is None else profiles
    wanted = profiles or (firewall.PROFILE,)
    asked = _asked_profiles(marker)
    if set(wanted) <= asked:
        return
    programs = programs or firewall.node_programs(platform)
    present = present or (lambda rule: firewall.present(rule, platform))
    add = add or (lambda rules: firewall.add_elevated(rules, paths.data_dir(), platform))
    missing = [r for r in firewall.rules(programs, wanted) if not present(r)]
    if missing:
        print("This is the first run over several machines here: Windows Defender Firewall must let DDP Studio's "
              "Python accept connections from the other machines.", file=out)
        if not interactive:
            why = "no terminal to ask in"
        elif ask("Add the firewall rules now (Windows asks for an administrator's approval)? [y/N] ").strip().lower() \
                in ("y", "yes"):
            why = add(missing)
        else:
            why = "you chose not to add them"
        deadline = time.monotonic() + 30  # the elevated netsh runs on its own
        while why is None and any(not present(r) for r in missing):
            if time.monotonic() > deadline:
                why = "netsh did not add them within 30 s"
            time.sleep(0.5)
        if why is None:
            print(f"added {len(missing)} firewall rule(s): {', '.join(r.name for r in missing)}", file=out)
        else:
            print(f"The firewall rules were not added ({why}). " + firewall.advice(programs, port, profiles),
                  file=out)
    paths.data_dir().mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{MARKER_TEXT}: {','.join(p for p in firewall.PROFILES if p in asked | set(wanted))}\n",
                      encoding="utf-8")


MARKER_TEXT = "asked about the firewall rules for multi-machine runs"


def _asked_profiles(marker) -> set[str]:
    """The firewall profiles already asked about; a marker of an earlier version (no list) asked for private."""
    try:
        text = marker.read_text(encoding="utf-8").strip()
    except OSError:
        return set()
    listed = text.partition(":")[2]
    return {p.strip() for p in listed.split(",") if p.strip()} if listed else {"private"}


def _stop_on_stdin(session) -> None:
    """Until a 'stop' line or the end of stdin (the window closed it, or died): then stop the run."""
    for line in sys.stdin:
        if line.strip().lower() == "stop":
            break
    while session.proc is None:  # the node launcher is about to start
        time.sleep(0.05)
    session.stop()
