"""The engines a job can go to, by name: one door for the command line and the window's Copy as menu.

``Options`` are what ``export-job``'s flags and the window's Copy as dialog
choose; ``export`` turns a plan and those options into the engine's text, so
both front ends write the same job for the same choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core.jobs.job import DEFAULT_PORT, Job, JobError, Shape, cluster_job
from ddpstudio.core.plan import Plan

ENGINES = ("torchrun", "slurm", "skypilot", "k8s")
# How each engine's export is named to a person (the window's Copy as menu, the words).
TITLES = {"torchrun": "torchrun", "slurm": "SLURM script", "skypilot": "SkyPilot task", "k8s": "Kubeflow TrainJob"}


@dataclass(frozen=True)
class Options:
    """The cluster's choices; None: the run's own (its ranks per node, device, restarts)."""

    nodes: int = 1
    procs_per_node: int | None = None
    device: str | None = None  # cuda | cpu
    port: int = DEFAULT_PORT
    max_restarts: int | None = None
    host: str | None = None  # torchrun: the first node's address
    accelerator: str = "A100"  # SkyPilot: the GPU type
    image: str = ""  # Kubernetes: the container image

    def shape(self, plan: Plan) -> Shape:
        restarts = plan.max_restarts if self.max_restarts is None else self.max_restarts
        return Shape(nodes=self.nodes, procs_per_node=self.procs_per_node or plan.ranks_per_node, port=self.port,
                     max_restarts=restarts, host=self.host or None, device=self.device)


def render(engine: str, job: Job, *, accelerator: str = "A100", image: str = "") -> str:
    """The text of ``job`` for ``engine`` (one of ENGINES); ``accelerator``: SkyPilot's GPU type, ``image``:
    the Kubernetes container image."""
    from ddpstudio.core.jobs import k8s, skypilot, slurm, torchrun

    if engine == "skypilot":
        return skypilot.render(job, accelerator)
    if engine == "k8s":
        return k8s.render(job, image)
    return {"torchrun": torchrun.render, "slurm": slurm.render}[engine](job)


def export(engine: str, options: Options, plan: Plan, source: str, workers: int | None = None,
           run_id: str | None = None) -> str:
    """``plan`` as ``engine``'s job text; raises JobError. ``run_id``: the cluster run's id (default a new one)."""
    job = cluster_job(plan, options.shape(plan), source, workers, run_id=run_id)
    return render(engine, job, accelerator=options.accelerator, image=options.image)


def save(text: str, path: str | Path) -> Path:
    """Write a job file as its engine reads it: LF lines (bash reads no CRLF, also when written on Windows),
    executable for a script; raises JobError, in one line, where it cannot be written."""
    from ddpstudio.core.outputfile import file_problem, write_failure

    out = Path(path)
    problem = file_problem(out, "the job file")  # a folder, /proc, a read-only or missing folder: one line
    if problem:
        raise JobError(problem)
    try:
        out.write_text(text, encoding="utf-8", newline="\n")
        out.chmod(out.stat().st_mode | 0o111)
    except OSError as exc:
        raise JobError(write_failure(out, exc)) from None
    return out
