"""A run's plan turned into a cluster job: its shape, the cluster plan, the command every rank runs.

The ranks of an exported job meet through torchrun's c10d rendezvous, so the
plan's own store (a FileStore path or a TCPStore port on this machine) gives
way to ``env://``; environment choices tied to this machine are dropped and
named, so the comment header of each export can say so.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace

from ddpstudio.core.plan import Plan
from ddpstudio.core.scriptmodule import module_root

# torchrun's own --rdzv-endpoint default port (torch/distributed/run.py: "--master-port", default=29500).
DEFAULT_PORT = 29500

# Variables of a plan that describe this machine, not the run: never carried to a cluster.
MACHINE_LOCAL = {
    "GLOO_SOCKET_IFNAME": "names an adapter of this machine (the loopback pin of a one-machine run)",
    "__PYVENV_LAUNCHER__": "the path of this machine's Windows virtual environment",
    "DDPSTUDIO_PACKAGE_DIR": "where DDP Studio is installed on this machine, for the rank helper in the Python you "
                             "chose for your script",
    "USE_LIBUV": "the Windows TCPStore workaround (pytorch #139990); Linux wheels have libuv",
    "DDPSTUDIO_NO_NCCL": "the swap of a script's NCCL for Gloo on Windows or without GPUs; a cluster's GPUs have NCCL",
    "TORCHELASTIC_USE_AGENT_STORE": "DDP Studio's stand-in for torchrun's agent; torchrun sets its own",
    "TORCHELASTIC_RESTART_COUNT": "DDP Studio's stand-in for torchrun's agent; torchrun sets its own",
    "TORCHELASTIC_RUN_ID": "the host's run id on a joining machine of DDP Studio's run; torchrun sets its own",
    "CUDA_VISIBLE_DEVICES": "the GPUs chosen on this machine (--gpus, by UUID); a cluster's scheduler gives each "
                            "node its GPUs",
}


class JobError(ValueError):
    """A plan that cannot be handed to a cluster as asked (said in one sentence)."""


@dataclass(frozen=True)
class Shape:
    """The cluster inputs every engine takes: nodes, processes per node, the rendezvous, restarts."""

    nodes: int = 1
    procs_per_node: int = 1
    port: int = DEFAULT_PORT
    max_restarts: int = 0
    host: str | None = None  # the rendezvous host; None: the job finds it (SLURM) or the user sets HEAD_NODE
    device: str | None = None  # cuda | cpu; None keeps the plan's

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node


@dataclass
class Job:
    """What every engine's export is written from."""

    plan: Plan  # the cluster's plan: env://, its world size, backend and device
    shape: Shape
    source: str  # where the run came from: "run 2026...-abc123" or "the run options given"
    entry: list[str]  # what torchrun starts per rank, after torchrun's own options ({plan} is the plan file)
    translated: list[str] = field(default_factory=list)
    left_to_user: list[str] = field(default_factory=list)

    def entry_text(self, plan_file: str) -> str:
        """The per-rank command for a shell line; ``plan_file`` is inserted as written (a "$VAR" stays live)."""
        return " ".join(plan_file if part == "{plan}" else shlex.quote(part) for part in self.entry)


def cluster_job(plan: Plan, shape: Shape, source: str, workers: int | None = None, *,
                run_id: str | None = None) -> Job:
    """``plan`` (a past run's or freshly built) as a job of ``shape.nodes`` x ``shape.procs_per_node`` ranks.
    ``workers``: DataLoader workers the user asked for; None lets each node choose for its own cores
    (core/dataworkers.py workers_in_rank), not keep the number chosen for this machine. ``run_id``: the
    cluster run's id; None: a new one (the window keeps one per Copy as dialog, so its preview holds still)."""
    if shape.nodes < 1 or shape.procs_per_node < 1:
        raise JobError("--nodes and --gpus-per-node must be at least 1")
    if shape.max_restarts < 0:
        raise JobError("--max-restarts cannot be negative")
    if plan.script is not None and plan.script.style == "spawn":
        raise JobError("a spawn-style script starts its own ranks (torch.multiprocessing.spawn); torchrun starts "
                       "one process per rank: run it with --script-style env (it reads RANK, WORLD_SIZE, ...)")
    device = shape.device or plan.device
    backend = "nccl" if device == "cuda" else "gloo"
    translated = [f"{shape.nodes} node(s) x {shape.procs_per_node} process(es) = {shape.world_size} ranks "
                  f"(this run had {plan.world_size})",
                  f"backend {backend} on {device}" + (" (NCCL: the Linux GPU backend)" if backend == "nccl" else "")]
    left = ["a Python environment with torch and ddpstudio on every node (the image or module to load)"]
    if plan.script is not None and plan.script.python:
        left[0] += f", and the packages your script used from {plan.script.python} here"
    env, dropped = {}, []
    for key, value in sorted(plan.env.items()):
        if key in MACHINE_LOCAL:
            dropped.append(f"{key}: {MACHINE_LOCAL[key]}")
        else:
            env[key] = value
    translated += [f"environment {k}={v}" for k, v in env.items()]
    translated += [f"dropped {d}" for d in dropped]
    exchange = plan.grad_exchange
    if backend == "nccl" and exchange != "native":
        exchange = "native"
        translated.append(f"gradient exchange native (this run's {plan.grad_exchange} exchange is for Gloo on GPUs)")
    from ddpstudio.core.policy import new_run_id

    # A new run id: the cluster's run is a run of its own, beside the one it came from.
    cluster = replace(plan, run_id=run_id or new_run_id(), world_size=shape.world_size, nodes=shape.nodes, node_rank=0,
                      backend=backend, device=device, store="tcp", init_method="env://", store_path=None,
                      store_is_fixed=False, master_addr="", master_port=None, env=env, python="",
                      grad_exchange=exchange, run_dir="", gpus=None, max_restarts=0,
                      reasons=[f"exported from {source} for a cluster of {shape.nodes} node(s)"])
    if plan.recipe is not None:
        recipe = cluster.recipe = replace(plan.recipe, workers=workers)
        cluster.effective_batch = recipe.batch_size * shape.world_size * recipe.accumulate
        cluster.lr = recipe.lr * (shape.world_size * recipe.accumulate if recipe.scale_lr else 1)
        entry = ["-m", "ddpstudio.rank.recipe", "{plan}", "--init-method", "env://"]
        translated.append(f"the built-in recipe: {recipe.model} on {recipe.data} data, batch {recipe.batch_size} "
                          f"per rank (effective {cluster.effective_batch}), "
                          + (f"{workers} data worker(s) per rank" if workers is not None else
                             "data workers chosen on each node for its cores"))
        if recipe.data_dir:
            left.append(f"the data at {recipe.data_dir} on every node (or change data_dir in the plan)")
        if recipe.checkpoint_dir:
            left.append(f"the checkpoint folder {recipe.checkpoint_dir}: a folder every node can reach")
    else:
        script = plan.script
        assert script is not None
        cluster.script = replace(script, python=None)  # this machine's interpreter; each node runs its own
        entry = _script_entry(plan, cluster)
        translated.append(f"your script {script.path} ({script.style} style) with its arguments"
                          + (f", run as python -m {script.module}" if script.module else ""))
        left.append(f"your package {script.module.split('.')[0]} in the working folder of every node, as in "
                    f"{module_root(script.path, script.module)} here (torchrun -m finds it from there)"
                    if script.module else f"your script at {script.path} on every node (or change the path below)")
    return Job(cluster, shape, source, entry, translated, left)


# torchrun's per-rank variables, for the fields of an args-style template (core/launch/commands.py dist_args).
_TEMPLATE_VARS = {"rank": "RANK", "local_rank": "LOCAL_RANK", "gpu": "LOCAL_RANK", "port": "MASTER_PORT",
                  "addr": "MASTER_ADDR"}


def _script_entry(plan: Plan, cluster: Plan) -> list[str]:
    """torchrun runs an env-style script as is; an args-style one gets its template filled per rank by a
    shell, since torchrun passes every rank the same arguments (only the environment tells RANK apart)."""
    from ddpstudio.core import cmdline

    script = plan.script
    assert script is not None
    # Env style: torchrun's variables only, unless the script takes torch.distributed.launch's --local-rank
    # (ScriptSpec.local_rank_option), which torchrun does not give: then a shell fills it per rank too.
    template = (f"{script.local_rank_option}={{local_rank}}" if script.local_rank_option else "") \
        if script.style == "env" else script.dist_args
    entry = script.entry()
    if not template.strip():
        return [*entry, *script.args]
    marks = {name: f"\0{var}\0" for name, var in _TEMPLATE_VARS.items()}
    try:
        tokens = [t.format(url="env://", backend=cluster.backend, world_size=cluster.world_size, **marks)
                  for t in cmdline.split(template)]
    except (KeyError, IndexError, ValueError) as exc:
        raise JobError(f"the argument template {template!r} is not valid ({exc})") from None
    line = " ".join(shlex.quote(p) for p in ["python", "-u", *entry, *script.args, *tokens])
    for var in set(_TEMPLATE_VARS.values()):  # inside single quotes: close, expand, reopen
        line = line.replace(f"\0{var}\0", f"'\"${var}\"'")
    return ["--no-python", "sh", "-c", f"exec {line}"]
