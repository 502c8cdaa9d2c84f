"""The bash every exported job shares: the comment header, the plan written into the run folder, torchrun's line.

Each node writes the same plan into ``RUN_DIR`` (temp file, then ``mv``: a
rename is atomic, so a node never reads half a plan another node is writing)
and points the recipe's events there (``DDPSTUDIO_EVENTS_DIR``, core/protocol.py),
so a run folder on a shared disk reads like a local run in ``ddpstudio runs``.
"""

from __future__ import annotations

import json
import shlex

from ddpstudio import __version__
from ddpstudio.core.jobs.job import Job
from ddpstudio.core.protocol import EVENTS_DIR_ENV

RUN_DIR_ENV = "DDPSTUDIO_RUN_DIR"
PLAN_END = "DDPSTUDIO_PLAN"
# torchrun's switch for a store of its own per rendezvous round (elastic/rendezvous/dynamic_rendezvous.py
# use_agent_store: os.getenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "0") != "1"); see restart_lines.
FRESH_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"


def header(job: Job, engine: str, *extra_left: str, rendezvous: str = "") -> list[str]:
    """Comment lines: where the job came from, what was translated, what is left to the user.
    ``rendezvous``: how the nodes meet, when not torchrun's c10d at HEAD_NODE."""
    fresh = f", each on a fresh store ({FRESH_STORE_ENV}=1)" if job.shape.max_restarts else ""
    rendezvous = rendezvous or (f"rendezvous: torchrun's c10d at the head node's port {job.shape.port}, up to "
                                f"{job.shape.max_restarts} restart(s){fresh}; the ranks join with env://")
    lines = [f"# DDP Studio {__version__}: {engine} job exported from {job.source}.", "#", "# Translated:"]
    lines += [f"#   - {item}" for item in [job.translated[0], job.translated[1], rendezvous, *job.translated[2:]]]
    lines += ["# Left to you:"]
    lines += [f"#   - {item}" for item in [*job.left_to_user, *extra_left]]
    lines += [f"#   - {RUN_DIR_ENV}: a folder every node can write (a shared disk); DDP Studio reads the run "
              "there like a local one ('ddpstudio runs' when it lies in DDP Studio's runs folder)"]
    return lines


def run_dir_lines(job: Job, default: str) -> list[str]:
    """Set RUN_DIR, write the plan into it, point the ranks' events and environment there."""
    plan = json.dumps(job.plan.to_dict(), indent=1, sort_keys=True)
    lines = [f'RUN_DIR="${{{RUN_DIR_ENV}:-{default}}}"',
             'mkdir -p "$RUN_DIR/events"',
             'plan_tmp="$RUN_DIR/plan.json.$(hostname).$$"',
             f"cat > \"$plan_tmp\" <<'{PLAN_END}'", plan, PLAN_END,
             'mv -f "$plan_tmp" "$RUN_DIR/plan.json"',
             f'export {EVENTS_DIR_ENV}="$RUN_DIR/events"',
             "export PYTHONUNBUFFERED=1"]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(job.plan.env.items())]
    return lines


def restart_lines(job: Job) -> list[str]:
    """With restarts, a c10d rendezvous whose every round gets a store of its own.

    torch 2.14.1's agents share one TCPStore with their ranks and make it in the first round only
    (dynamic_rendezvous.py ``next_rendezvous``: a server is built "when this is the first rendezvous"), so a
    restarted group meets on the dead group's keys: Gloo's ``createAndConnectAllPairs`` (gloo
    transport/tcp/context.cc) does ``store.wait({key})`` then ``store.get(key)`` for each peer's rank, finds
    the killed rank's address and waits for it. Seen here: a restart under load hung in
    ``Pair::waitUntilConnected`` for over 200 s (pytorch #135712, where this switch is the workaround).
    Unshared, each round's rank 0 hosts a new store on a free port (elastic/rendezvous/api.py
    ``RendezvousStoreInfo.build``: ``port = server_port or get_free_port()``).
    """
    return [f"export {FRESH_STORE_ENV}=1"] if job.shape.max_restarts > 0 else []


def torchrun_words(job: Job, nnodes: str, endpoint: str, rdzv_id: str, nproc: str | None = None) -> str:
    """``torchrun ... ENTRY``; the string arguments are shell words as written (they may expand variables)."""
    shape = job.shape
    return (f"torchrun --nnodes {nnodes} --nproc-per-node {nproc or shape.procs_per_node} --rdzv-backend c10d "
            f"--rdzv-endpoint {endpoint} --rdzv-id {rdzv_id} --max-restarts {shape.max_restarts} "
            + job.entry_text('"$RUN_DIR/plan.json"'))
