"""The SLURM export: an sbatch script, one task per node, torchrun in each task via srun.

The head node is the first of ``scontrol show hostnames "$SLURM_JOB_NODELIST"``;
every node's torchrun meets there through c10d and starts its ranks.
"""

from __future__ import annotations

from ddpstudio.core.jobs import shell
from ddpstudio.core.jobs.job import Job


def render(job: Job) -> str:
    shape = job.shape
    sbatch = [f"#SBATCH --job-name=ddpstudio-{job.plan.run_id}", f"#SBATCH --nodes={shape.nodes}",
              "#SBATCH --ntasks-per-node=1"]
    if job.plan.device == "cuda":
        sbatch.append(f"#SBATCH --gpus-per-node={shape.procs_per_node}")
    left = "the partition, account and time limit (#SBATCH --partition/--account/--time), as your cluster asks"
    lines = ["#!/bin/bash", *sbatch, *shell.header(job, "SLURM", left), "set -euo pipefail",
             'HEAD_NODE="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"',
             *shell.run_dir_lines(job, f"$HOME/ddpstudio-runs/{job.plan.run_id}-$SLURM_JOB_ID"),
             *shell.restart_lines(job),
             f'srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 '
             + shell.torchrun_words(job, '"$SLURM_JOB_NUM_NODES"', f'"$HEAD_NODE:{shape.port}"',
                                    '"$SLURM_JOB_ID"')]
    return "\n".join(lines) + "\n"
