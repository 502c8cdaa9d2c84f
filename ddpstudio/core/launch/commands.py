"""The command line and environment of each rank, for every kind of workload."""

from __future__ import annotations

import ntpath
import os
import shlex
from pathlib import Path

from ddpstudio.core.exchange.choice import COMPRESSION_ENV, EXCHANGE_ENV
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import Platform
from ddpstudio.core.launch.rundir import RunDir
from ddpstudio.core.protocol import EVENTS_DIR_ENV, STOP_FILE_ENV


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


def dist_args(template: str, plan: Plan, rank: int) -> list[str]:
    """The style-b arguments: split first, then fill in, so a URL with spaces stays one argument."""
    values = {"url": plan.init_method, "backend": plan.backend, "world_size": plan.world_size,
              "rank": rank, "local_rank": rank, "port": plan.master_port or "", "addr": plan.master_addr}
    try:
        return [token.format(**values) for token in shlex.split(template)]
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"the argument template {template!r} is not valid ({exc}); "
                         "use the fields {url} {backend} {world_size} {rank}") from exc


def rank_command(plan: Plan, rank: int, plan_path: str) -> list[str]:
    python = plan.python
    if plan.recipe is not None:
        return [python, "-u", "-m", "ddpstudio.rank.recipe", plan_path]
    script = plan.script
    assert script is not None
    cmd = [python, "-u", script.path, *script.args]
    if script.style == "args":
        cmd += dist_args(script.dist_args, plan, rank)
    return cmd


def rank_env(plan: Plan, rank: int, events_dir: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """torchrun's variables plus ours; inherits the launcher's environment."""
    env = dict(os.environ if base is None else base)
    env.update({
        "RANK": str(rank),
        "LOCAL_RANK": str(rank - plan.local_ranks().start),
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
    # Same default as torchrun: several ranks sharing the cores should not each spawn a thread per core.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(plan.env)
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
