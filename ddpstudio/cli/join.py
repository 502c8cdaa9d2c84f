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
                        f"the join code's script entry is damaged; {joincode.BAD_CODE_HINT}")
    if not args.json:
        print(f"joining {code.masked()}" + (f"; running {script_path}" if script_path else ""), flush=True)  # the token only masked: this may end up in a log
    try:
        adapter = choose(code.addresses, args.ifname)
    except AdapterError as exc:
        return fail(str(exc))
    host = next((a for a in code.addresses if a == adapter.address or route_source(a) == adapter.address),
                code.addresses[0])
    plan = join_stub_plan(code.world_size, code.nodes, host, code.port, adapter, current())
    spec = NodeSpec(NodeRole.JOIN, host, code.port, code.nodes, code.ranks_per_node, args.join_timeout,
                    label(adapter.address), host_run_id=code.run_id, own_address=adapter.address,
                    script_path=script_path)
    return launch_node(plan, spec, code.token, args)
