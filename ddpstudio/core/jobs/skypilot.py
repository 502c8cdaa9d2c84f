"""The SkyPilot export: a task YAML whose ``run`` starts torchrun on every node (``num_nodes``).

SkyPilot gives each node ``SKYPILOT_NODE_IPS`` (one address a line, the head
first), ``SKYPILOT_NODE_RANK`` and ``SKYPILOT_NUM_GPUS_PER_NODE``
(docs.skypilot.co, running-jobs/distributed-jobs). The YAML is written in
JSON's flow style, which YAML 1.2 reads as is: the comment header, then one
JSON object, so any JSON reader checks it too.
"""

from __future__ import annotations

import json

from ddpstudio.core.jobs import shell
from ddpstudio.core.jobs.job import Job


def render(job: Job, accelerator: str = "A100") -> str:
    shape = job.shape
    cuda = job.plan.device == "cuda"
    run = ['HEAD_NODE="$(echo "$SKYPILOT_NODE_IPS" | head -n1)"',
           'echo "DDP Studio: node $SKYPILOT_NODE_RANK of $SKYPILOT_NUM_NODES, rendezvous at $HEAD_NODE"',
           *shell.run_dir_lines(job, f"$HOME/ddpstudio-runs/{job.plan.run_id}"), *shell.restart_lines(job),
           shell.torchrun_words(job, '"$SKYPILOT_NUM_NODES"', f'"$HEAD_NODE:{shape.port}"', job.plan.run_id,
                                '"$SKYPILOT_NUM_GPUS_PER_NODE"' if cuda else None)]
    task = {"name": f"ddpstudio-{job.plan.run_id}", "num_nodes": shape.nodes,
            "resources": {"accelerators": f"{accelerator}:{shape.procs_per_node}"} if cuda else {},
            "run": "set -euo pipefail\n" + "\n".join(run) + "\n"}
    left = [f"the accelerator type ({accelerator} here: --accelerator), cloud and region, as your account allows"
            if cuda else "the cloud, region and instance type, as your account allows",
            "a 'setup' section installing torch and ddpstudio (or an image that has them)"]
    return "\n".join(shell.header(job, "SkyPilot", *left)) + "\n" + json.dumps(task, indent=2) + "\n"
