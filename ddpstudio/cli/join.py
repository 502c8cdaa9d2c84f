"""``ddpstudio join CODE``: join a run hosted on another machine of the LAN (docs/multi-machine.md)."""

from __future__ import annotations

import argparse
import sys

from ddpstudio.cli.nodes import add_node_arguments, choose, label, launch_node
from ddpstudio.cli.run import fail


def add_parser(sub) -> None:
    p = sub.add_parser("join", help="join a run hosted on another machine (paste the host's join code)",
                       description="Join a multi-machine run: checks with the host that the versions, backend "
                                   "and layout match, then starts this machine's ranks.")
    p.add_argument("code", help="the join code 'ddpstudio host' printed (starts with ddps1.); '-' reads it from "
                                "stdin, which keeps it out of the process list other users of this machine see")
    p.add_argument("--json", action="store_true", help="print the protocol events (JSON lines) instead")
    p.add_argument("--store-path", metavar="PATH",
                   help="a run that meets at a shared folder: this machine's path to the host's store file, when "
                        "it differs from the host's (another drive letter for the same share)")
    add_node_arguments(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ddpstudio.core.nodes import joincode, nodescript
    from ddpstudio.core.nodes.adapter import AdapterError, route_source
    from ddpstudio.core.nodes.nodeplan import NodeRole, NodeSpec, join_stub_plan
    from ddpstudio.core.platform import current

    try:
        code = joincode.decode(sys.stdin.readline() if args.code == "-" else args.code)
    except joincode.JoinCodeError as exc:
        return fail(str(exc))
    script_path = ""
    if code.script:
        try:
            script_path = nodescript.locate(nodescript.ScriptRef.from_dict(code.script))
        except (nodescript.ScriptMissing, KeyError) as exc:
            return fail(str(exc) if isinstance(exc, nodescript.ScriptMissing) else
                        f"the join code's script entry is damaged; {joincode.PARTIAL_CODE_HINT}")
    if not args.json:
        print(f"joining {code.masked()}" + (f"; running {script_path}" if script_path else ""), flush=True)  # the token only masked: this may end up in a log
    try:
        adapter = choose(code.addresses, args.ifname)
    except AdapterError as exc:
        return fail(str(exc))
    store_path = args.store_path or code.store_path
    if store_path.startswith("file:"):  # the blog's URL form, read the way torch will
        from ddpstudio.core.rendezvous.storeurl import store_path_from_url

        try:
            store_path = store_path_from_url(store_path, current())
        except ValueError as exc:
            return fail(f"--store-path {store_path}: {exc}")
    if args.store_path and not code.store_path:
        return fail("--store-path: this run meets at the host's port, not at a shared folder; leave it out")
    from ddpstudio.core.nodes.sharedstore import PLACEHOLDER_PORT, folder_problem

    if store_path:
        problem = folder_problem(store_path)
        if problem:
            return fail(problem)
    host = next((a for a in code.addresses if a == adapter.address or route_source(a) == adapter.address),
                code.addresses[0])
    plan = join_stub_plan(code.world_size, code.nodes, host, code.port or PLACEHOLDER_PORT, adapter, current())
    spec = NodeSpec(NodeRole.JOIN, host, code.port, code.nodes, code.ranks_per_node, args.join_timeout,
                    label(adapter.address), host_run_id=code.run_id, own_address=adapter.address,
                    script_path=script_path, store_path=store_path)
    return launch_node(plan, spec, code.token, args)
