"""The command line and environment of each rank, for every kind of workload."""

from __future__ import annotations

import ntpath
import os
import string
from pathlib import Path

from ddpstudio.core import cmdline
from ddpstudio.core.exchange.choice import COMPRESSION_ENV, EXCHANGE_ENV
from ddpstudio.core.plan import Plan, ScriptSpec
from ddpstudio.core.platform import SAFE_PATH, Platform, current
from ddpstudio.core.launch.hangwatch import beat_interval, watches_hangs
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.protocol import EVENTS_DIR_ENV, HEARTBEAT_ENV, STOP_FILE_ENV
from ddpstudio.core.scriptmodule import module_root


def console_python(executable: str, platform: Platform, exists=os.path.exists) -> str:
    """The interpreter for ranks: on Windows ``python.exe`` beside a ``pythonw.exe``.

    The window runs under pythonw (no console); ranks started with it would
    have no usable stdio of their own, so they get the console interpreter,
    started with CREATE_NO_WINDOW so no console pops up.
    """
    if platform.is_windows and ntpath.basename(executable).lower() == "pythonw.exe":
        candidate = ntpath.join(ntpath.dirname(executable), "python.exe")
        if exists(candidate):
            return candidate
    return executable


TEMPLATE_FIELDS = "{url} {backend} {world_size} {rank} {local_rank} {gpu} {port} {addr}"


def gpu_index(plan: Plan, rank: int) -> int:
    """The CUDA device index a rank should use: its local rank, or 0 when it sees only its own GPU."""
    one = plan.script is not None and plan.script.one_gpu_per_rank
    return 0 if one else local_rank(plan, rank)


def local_rank(plan: Plan, rank: int) -> int:
    """A global rank's place on its machine (node rank x ranks per node + local rank = global rank)."""
    return rank - plan.local_ranks().start


def visible_gpu(rank: int, inherited: str | None) -> str:
    """CUDA_VISIBLE_DEVICES for one rank: the rank-th of the GPUs the launcher may use (all, if unset)."""
    allowed = [d.strip() for d in (inherited or "").split(",") if d.strip()]
    return allowed[rank] if rank < len(allowed) else str(rank)


def template_fields(template: str) -> set[str]:
    """The ``{field}`` names an argument template uses."""
    try:
        return {name.split("!")[0].split(":")[0] for _, name, _, _ in string.Formatter().parse(template) if name}
    except ValueError:
        return set()  # an unbalanced brace: dist_args says what is wrong


def gpu_problem(script: ScriptSpec | None, device: str) -> str | None:
    """Why a script's GPU settings cannot apply to a run on ``device`` (the CPU has no GPU to give a rank)."""
    if script is None or device == "cuda":
        return None
    if script.one_gpu_per_rank:
        return ("one GPU per rank (CUDA_VISIBLE_DEVICES) needs CUDA GPUs, and this run trains on the CPU "
                "(no CUDA GPU was found): turn 'one GPU per rank' (--one-gpu-per-rank) off")
    if script.style == "args" and "gpu" in template_fields(script.dist_args):
        return ("the argument template uses {gpu}, and this run trains on the CPU (no CUDA GPU was found), "
                "so there is no GPU to name: remove {gpu} from the argument template (--dist-args)")
    return None


def dist_args(template: str, plan: Plan, rank: int, platform: Platform | None = None) -> list[str]:
    """The style-b arguments: split first (by ``platform``'s rules, core/cmdline.py: a Windows path
    keeps its backslashes), then fill in, so a URL with spaces stays one argument."""
    values = {"url": plan.init_method, "backend": plan.backend, "world_size": plan.world_size,
              "rank": rank, "local_rank": local_rank(plan, rank), "gpu": gpu_index(plan, rank),
              "port": plan.master_port or "", "addr": plan.master_addr}
    try:
        return [token.format(**values) for token in cmdline.split(template, platform or current())]
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"the argument template {template!r} is not valid ({exc}); "
                         f"use the fields {TEMPLATE_FIELDS}") from exc


def rank_command(plan: Plan, rank: int, plan_path: str) -> list[str]:
    python = plan.python
    if plan.recipe is not None:
        return [python, "-u", SAFE_PATH, "-m", "ddpstudio.rank.recipe", plan_path]
    script = plan.script
    assert script is not None
    cmd = [python, "-u", *script.entry(), *script.args]
    if script.style in ("args", "spawn"):
        cmd += dist_args(script.dist_args, plan, rank)
    elif script.local_rank_option:  # env style, a script written for torch.distributed.launch
        cmd.append(f"{script.local_rank_option}={local_rank(plan, rank)}")
    return cmd


def module_path_env(script: ScriptSpec | None, env: dict[str, str]) -> dict[str, str]:
    """A script run as a module finds its package from the folder above it, first on PYTHONPATH."""
    if script is None or not script.module:
        return {}
    kept = env.get("PYTHONPATH", "")
    return {"PYTHONPATH": module_root(script.path, script.module) + (os.pathsep + kept if kept else "")}


def elastic_env(plan: Plan, rank: int, restarts: int = 0) -> dict[str, str]:
    """What torchrun's agent adds for an env-style script (torch/distributed/elastic/agent/server/
    local_elastic_agent.py, ``worker_env``): ``torch.distributed.is_torchelastic_launched()`` tests
    TORCHELASTIC_RUN_ID, and Lightning takes torchrun's world from these instead of its Trainer's
    ``devices``. One role ("default"), as torchrun's; the run id is the run's (a node run's is the host's:
    core/nodes/nodeplan.py). The store is rank 0's (env://), not an agent's, except in a node run. A
    ``@record`` main writes its failure to TORCHELASTIC_ERROR_FILE, in the run's logs/ (torchrun: its temp
    folder). TORCH_NCCL_ASYNC_ERROR_HANDLING: torchrun's default, kept where the user set their own."""
    if plan.script is None or plan.script.style != "env":
        return {}
    return {
        "TORCHELASTIC_ERROR_FILE": str(RunDir.at(plan.run_dir).error_file(rank, restarts)),
        "ROLE_NAME": "default",
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(plan.world_size),
        "GROUP_WORLD_SIZE": str(plan.nodes),
        "TORCHELASTIC_RUN_ID": plan.run_id,
        "TORCHELASTIC_RESTART_COUNT": str(restarts),
        "TORCHELASTIC_MAX_RESTARTS": str(plan.max_restarts),
        "TORCHELASTIC_USE_AGENT_STORE": "False",
    }


# glibc's malloc for the built-in recipe's CPU ranks (mallopt(3), "Environment variables"): with its
# dynamic thresholds a one-rank process fell, in 7 runs of 9, into a regime where each step's large buffers
# went back to the kernel and came back page-faulted (resnet18 32 px: 96-104 ms a step instead of 77-81).
# Both fixed: 76-82 ms every run, ~100 MB more peak RSS; one alone is worse (docs/performance.md).
RECIPE_CPU_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 20)}


def malloc_env(plan: Plan, env: dict[str, str], platform: Platform) -> dict[str, str]:
    """RECIPE_CPU_MALLOC for a recipe rank on the CPU off Windows, unless ``env`` already sets either (one
    alone is worse than none)."""
    if plan.recipe is None or plan.device != "cpu" or platform.is_windows:
        return {}
    return {} if any(name in env for name in RECIPE_CPU_MALLOC) else dict(RECIPE_CPU_MALLOC)


def rank_env(plan: Plan, rank: int, events_dir: str, base: dict[str, str] | None = None,
             restarts: int = 0) -> dict[str, str]:
    """torchrun's variables plus ours; inherits the launcher's environment. ``restarts``: how often the
    group was started again (core/launch/restart.py), TORCHELASTIC_RESTART_COUNT for an env-style script."""
    env = dict(os.environ if base is None else base)
    env.update({
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank(plan, rank)),
        "WORLD_SIZE": str(plan.world_size),
        "LOCAL_WORLD_SIZE": str(plan.ranks_per_node),
        "GROUP_RANK": str(plan.node_rank),
        "MASTER_ADDR": plan.master_addr,
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8",
        EVENTS_DIR_ENV: events_dir,
        STOP_FILE_ENV: str(RunDir.at(plan.run_dir).rank_stop_file),
        "DDPSTUDIO_RUN_ID": plan.run_id,
    })
    if plan.master_port:
        env["MASTER_PORT"] = str(plan.master_port)
    elastic = elastic_env(plan, rank, restarts)
    if elastic:
        env.update(elastic)
        env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    # Same default as torchrun: several ranks sharing the cores should not each spawn a thread per core.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(malloc_env(plan, env, current()))
    env.update(plan.env)
    env.update(module_path_env(plan.script, env))
    if plan.script is not None and plan.script.one_gpu_per_rank:
        env["CUDA_VISIBLE_DEVICES"] = visible_gpu(local_rank(plan, rank), env.get("CUDA_VISIBLE_DEVICES"))
    if watches_hangs(plan):  # the ranks beat their step and phase (rank/heartbeat.py)
        env[HEARTBEAT_ENV] = f"{beat_interval(plan.hang_timeout):g}"
    if plan.script is not None and plan.script.style == "spawn":
        from ddpstudio.core.launch.spawned import spawn_env

        spawn_env(env, RunDir.at(plan.run_dir).logs_dir)
    return add_exchange_env(plan, env)


def rank_helper_dir() -> str:
    """The folder holding only the rank helper's ``sitecustomize`` (docs/exchange.md)."""
    return str(Path(__file__).resolve().parents[2] / "rank" / "helper")


def add_exchange_env(plan: Plan, env: dict[str, str]) -> dict[str, str]:
    """The exchange mode for every rank; a user script's ranks also get the helper first on PYTHONPATH."""
    env[EXCHANGE_ENV] = plan.grad_exchange
    env[COMPRESSION_ENV] = plan.grad_compression
    if plan.script is not None and plan.rank_helper:
        kept = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = rank_helper_dir() + (os.pathsep + kept if kept else "")
    return env
