"""A node's plan: the host's (the single-machine plan spread over N nodes) and a joining node's.

The host decides the workload (recipe, backend, layout, rendezvous); a joining
node takes that shared part from the start record and keeps what is its own
(run id and folder, interpreter, environment, adapter). ``node.json`` beside
the plan holds what only the node launcher needs (role, address, timeouts);
the token is never written to disk (``TOKEN_ENV``).
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ddpstudio.core.atomic import write_json
from ddpstudio.core.nodes.adapter import AdapterChoice, gloo_env, gloo_pin
from ddpstudio.core.nodes.store import AGENT_STORE_ENV
from ddpstudio.core.plan import ONE_RANK_EXCHANGE, Plan
from ddpstudio.core.platform import Platform
from ddpstudio.core.words import counted

TOKEN_ENV = "DDPSTUDIO_NODE_TOKEN"  # the node launcher pops it: ranks never see it
NODE_FILE = "node.json"
# Fields of the host's plan that are the run's, not the host machine's.
LOCAL_FIELDS = ("run_id", "run_dir", "python", "env", "store_path", "store_is_fixed", "reasons", "device", "origin")


class NodeRole(enum.StrEnum):
    HOST = "host"
    JOIN = "join"


@dataclass
class NodeSpec:
    role: NodeRole
    address: str  # host: the address the store listens on; join: the host's address
    port: int
    nodes: int
    ranks_per_node: int
    join_timeout: float
    label: str  # this machine as messages name it: "hostname (address)"
    host_run_id: str = ""
    own_address: str = ""  # join: this machine's address on the chosen adapter (the reach-back probe listens there)
    script_path: str = ""  # join: the host's script as found on this machine (nodescript.locate)
    store_path: str = ""  # set: the nodes meet at this FileStore on a shared folder, not at address:port (sharedstore)

    def write(self, run_dir: str | os.PathLike) -> Path:
        return write_json(Path(run_dir) / NODE_FILE, asdict(self))

    @classmethod
    def read(cls, path: str | os.PathLike) -> "NodeSpec":
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        spec = cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})
        spec.role = NodeRole(spec.role)
        return spec


def _node_env(env: dict[str, str], adapter: AdapterChoice, platform: Platform) -> dict[str, str]:
    env = {k: v for k, v in env.items() if k != "GLOO_SOCKET_IFNAME"}  # not the single-machine loopback pin
    env.update(gloo_env(adapter, platform.is_windows))
    env.update(AGENT_STORE_ENV)
    return env


def host_plan(plan: Plan, nodes: int, ranks_per_node: int, adapter: AdapterChoice, port: int,
              platform: Platform) -> Plan:
    """The single-machine plan (``ranks_per_node`` ranks) turned into the host's plan for ``nodes`` nodes."""
    from ddpstudio.core.rendezvous.ports import tcp_init_url

    world = nodes * ranks_per_node
    per_rank = plan.recipe.batch_size if plan.recipe else None
    reasons = [r for r in plan.reasons if "loopback" not in r and not r.startswith("effective batch")]
    if world > 1:  # one rank per machine still exchanges between the machines (rank/recipe.py: DDP)
        reasons = [f"{plan.grad_exchange} gradient exchange between the machines' ranks" if r == ONE_RANK_EXCHANGE
                   else r for r in reasons]
    reasons.append(f"{nodes} machines x {counted(ranks_per_node, 'rank')} = {world} ranks; the host's store "
                   f"listens on {adapter.address}:{port}")
    reasons.append(f"network adapter {adapter.reason}")
    reasons.append(gloo_pin(adapter, platform.is_windows).why)
    if per_rank:
        reasons.append(f"effective batch {world * per_rank} = {world} ranks x {per_rank} per rank")
    return replace(plan, world_size=world, nodes=nodes, node_rank=0, store="tcp", store_path=None,
                   store_is_fixed=False, master_addr=adapter.address, master_port=port,
                   init_method=tcp_init_url(adapter.address, port, platform),
                   env=_node_env(plan.env, adapter, platform), reasons=reasons,
                   effective_batch=world * per_rank if per_rank else plan.effective_batch)


def shared_part(plan: Plan) -> dict:
    """What every node runs by: the host's plan without its machine's own fields (plus two hints)."""
    shared = {k: v for k, v in plan.to_dict().items() if k not in LOCAL_FIELDS}
    return {**shared, "device_hint": plan.device, "host_run_id": plan.run_id}


def joined_plan(local: Plan, shared: dict, node_rank: int, cuda: bool) -> Plan:
    """A joining node's plan: the host's shared part, this node's rank, and this machine's own fields
    (its environment already pins Gloo to its adapter: :func:`join_env`). ``cuda``: this machine trains
    on its GPUs (the host does, and it has some)."""
    host = Plan.from_dict({**shared, **{k: getattr(local, k) for k in LOCAL_FIELDS}})
    device = "cuda" if host.backend == "nccl" or cuda else "cpu"
    reasons = [f"joined the host's run {shared.get('host_run_id', '?')} as node {node_rank} of {host.nodes}",
               *local.reasons]
    env = host.env
    if host.script is not None and host.script.style == "env" and shared.get("host_run_id"):
        env = {**env, "TORCHELASTIC_RUN_ID": shared["host_run_id"]}  # one job id on every node, as torchrun's
    return replace(host, node_rank=node_rank, device=device, reasons=reasons, env=env)


def with_local_script(plan: Plan, script_path: str, platform: Platform) -> Plan:
    """A joining node's plan running the host's script from where it lies on this machine; on Windows its
    ranks are told there is no NCCL here, as a single machine's are (core/policy.py, rank/ncclswap.py),
    whatever the host runs on."""
    from ddpstudio.core.nodes.nodescript import local_cwd
    from ddpstudio.core.protocol import NO_NCCL_ENV, NO_NCCL_WINDOWS

    if plan.script is None or not script_path:
        return plan
    env = {**plan.env, NO_NCCL_ENV: NO_NCCL_WINDOWS} if platform.is_windows else plan.env
    return replace(plan, script=replace(plan.script, path=script_path, cwd=local_cwd(plan.script.cwd)), env=env)


def join_env(env: dict[str, str], adapter: AdapterChoice, platform: Platform) -> dict[str, str]:
    """A joining node's rank environment: Gloo on its adapter, the host's store as the agent store."""
    return _node_env(env, adapter, platform)


def join_stub_plan(world_size: int, nodes: int, host_address: str, port: int, adapter: AdapterChoice,
                   platform: Platform, backend: str = "gloo") -> Plan:
    """A joining node's plan before the handshake: its own run folder, interpreter and environment.

    The workload arrives from the host (:func:`joined_plan`); until then the plan
    holds only what this machine decides.
    """
    import sys

    from ddpstudio.core import paths
    from ddpstudio.core.launch.commands import console_python
    from ddpstudio.core.launch.interpreter import rank_interpreter
    from ddpstudio.core.policy import new_run_id
    from ddpstudio.core.rendezvous.ports import libuv_env, tcp_init_url

    run_id = new_run_id()
    interpreter = rank_interpreter(console_python(sys.executable, platform), platform)
    env = {**libuv_env(platform), **interpreter.env}
    return Plan(run_id=run_id, run_dir=str(paths.runs_dir() / run_id), world_size=world_size, backend=backend,
                device="cpu", store="tcp", init_method=tcp_init_url(host_address, port, platform),
                master_addr=host_address, master_port=port, env=join_env(env, adapter, platform),
                reasons=[f"network adapter {adapter.reason}", gloo_pin(adapter, platform.is_windows).why],
                python=interpreter.executable, nodes=nodes)
