"""``ddpstudio host``: plan a run over several machines, print the join code, train once all have joined."""

from __future__ import annotations

import argparse
import sys

from ddpstudio.cli.nodes import add_node_arguments, choose, label, launch_node
from ddpstudio.cli.run import _on_claimed_path, fail, plan_or_exit, positional_script


def _run_options() -> argparse.ArgumentParser:
    """The run command's options, to inherit: 'host' trains exactly what 'run' would."""
    from ddpstudio.cli import run

    holder = argparse.ArgumentParser(add_help=False).add_subparsers()
    run.add_parser(holder)
    return holder.choices["run"]


def add_parser(sub) -> None:
    p = sub.add_parser("host", parents=[_run_options()], add_help=False, conflict_handler="resolve",
                       help="host a run over several machines on a LAN and print the code the others join with",
                       description="Host a DDP run over several machines: takes the options of 'ddpstudio run', "
                                   "prints a join code, and starts training when every node has joined "
                                   "(docs/multi-machine.md). Trusted LAN only: the store has no authentication.")
    group = p.add_argument_group("machines")
    group.add_argument("--nodes", type=int, required=True, help="machines in the run, this one included (>= 2)")
    group.add_argument("--ranks-per-node", default="auto", metavar="auto|K",
                       help="ranks on each machine (auto: one per GPU here, 2 on the CPU)")
    add_node_arguments(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ddpstudio.core.nodes import joincode, nodescript
    from ddpstudio.core.nodes.adapter import AdapterError
    from ddpstudio.core.nodes.facts import local_facts
    from ddpstudio.core.nodes.nodeplan import NodeRole, NodeSpec, host_plan
    from ddpstudio.core.nodes.sharedstore import PLACEHOLDER_PORT, host_on_folder
    from ddpstudio.core.platform import current
    from ddpstudio.core.rendezvous.ports import find_free_port, is_port_free

    if args.nodes < 2:
        return fail(f"--nodes {args.nodes}: a multi-machine run has at least 2 nodes; for one machine use "
                    "'ddpstudio run'")
    per_node = None if args.ranks_per_node == "auto" else _positive(args.ranks_per_node)
    if per_node == 0:
        return fail(f"--ranks-per-node {args.ranks_per_node!r}: give auto or a whole number from 1")
    if args.store == "file" and not args.store_path:
        return fail("--store file: a multi-machine run meets at a FileStore on a shared folder only with "
                    "--store-path (e.g. \\\\server\\share\\pg); leave both out to meet at this machine's port")
    if args.store_path and args.port is not None:
        return fail("--port is for the host's TCP store; with --store-path the machines meet at the shared "
                    "folder's file: leave --port out")
    script_problem = positional_script(args)
    if script_problem:
        return fail(script_problem)
    if args.script and args.store_path:
        return fail("your own script across machines meets at this machine's port (its ranks use "
                    "MASTER_ADDR/MASTER_PORT or the host's URL); leave out --store-path")
    if getattr(args, "python", None) is not None:
        return fail(f"--python {args.python}: over several machines every machine's ranks run in its own DDP Studio's "
                    "Python, so that all have the same torch; --python is for a run on one machine")
    if args.script and _style(args) == "spawn":
        return fail(nodescript.SPAWN_REFUSED)
    if args.gpus is not None:
        # Each machine keeps its own rank environment (nodeplan.LOCAL_FIELDS), so a choice made here could not
        # reach the other machines' GPUs: one rule for all of them instead.
        return fail("--gpus chooses the GPUs of one machine ('ddpstudio run'); a multi-machine run trains on every "
                    "GPU of each machine: leave --gpus out, and hide a GPU from a machine by starting DDP Studio "
                    "there with CUDA_VISIBLE_DEVICES set")
    if args.max_restarts:
        return fail("--max-restarts is for one machine's run: the machines of a multi-machine run would have to "
                    "restart together, which DDP Studio does not do; leave it out")
    if args.world_size is not None:
        return fail("--world-size counts one machine's ranks; for several machines give --ranks-per-node "
                    "(world size = nodes x ranks per node)")
    platform = current()
    if args.script and args.no_rank_helper and platform.is_windows:
        return fail("--no-rank-helper: on Windows a script's ranks reach the host's store through DDP Studio's "
                    "rank helper (torch's own client asks for libuv, which PyTorch for Windows lacks: pytorch "
                    "#148283); leave --no-rank-helper out")
    try:
        adapter = choose(override=args.ifname)
    except AdapterError as exc:
        return fail(str(exc))
    if args.port is not None and not is_port_free(args.port, adapter.address):
        return fail(f"port {args.port} is taken on {adapter.address}; choose another --port or leave it out")
    port = 0 if args.store_path else args.port or find_free_port(adapter.address)
    args.world_size, args.store, args.port = per_node, "file" if args.store_path else "tcp", port or None
    plan = plan_or_exit(args, platform)
    if isinstance(plan, int):
        return plan
    k = plan.world_size
    shared_path = plan.store_path  # the policy's reading of --store-path (a file:// URL too), or None
    plan = host_plan(plan, args.nodes, k, adapter, port or PLACEHOLDER_PORT, platform)
    if shared_path:
        plan = host_on_folder(plan, shared_path, platform)
    facts = local_facts(platform, plan.backend, args.nodes, k)
    token = joincode.new_token()
    script = nodescript.script_ref(plan.script.path, plan.script.style, plan.script.cwd).to_dict() \
        if plan.script else {}
    code = joincode.JoinCode((adapter.address, *adapter.others), port, plan.run_id, args.nodes, k, token,
                             facts.versions(), script, store_path=plan.store_path or "")
    spec = NodeSpec(NodeRole.HOST, adapter.address, port, args.nodes, k, args.join_timeout, label(adapter.address),
                    store_path=plan.store_path or "")

    def show_and_launch() -> int:
        _show_code(joincode.encode(code), code, args.json, adapter, plan.reasons)
        return launch_node(plan, spec, token, args)

    # A shared store file is claimed like a fixed --store-path of one machine, and an earlier run's leftover
    # is cleaned first (before the code is shown: a refused host prints no code).
    return _on_claimed_path(plan, args, show_and_launch) if shared_path else show_and_launch()


def _style(args: argparse.Namespace) -> str:
    """The script style as 'run' would choose it; fixed on ``args`` so the plan does not say it twice."""
    from ddpstudio.cli.run import chosen_style

    args.script_style = args.script_style or chosen_style(args.script, list(args.script_args),
                                                          args.dist_args is not None)
    return args.script_style


def _positive(raw: str) -> int:
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


def _show_code(text: str, code, as_json: bool, adapter, reasons: list[str]) -> None:
    """The code goes to this terminal only (never into the run's files: it holds the token)."""
    if as_json:
        from ddpstudio.core import protocol

        sys.stdout.write(protocol.make_event(protocol.JOIN_CODE, code=text, run_id=code.run_id, port=code.port,
                                             addresses=list(code.addresses), adapter=adapter.name,
                                             adapter_reason=adapter.reason, reasons=list(reasons)).to_line() + "\n")
        sys.stdout.flush()
        return
    print(f"run {code.run_id}: {code.nodes} machines x {code.ranks_per_node} ranks; on each other machine run\n\n"
          f"    ddpstudio join {text}\n\n"
          "The code holds a secret token: share it only with the machines of this run.", flush=True)
