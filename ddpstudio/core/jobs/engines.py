"""The engines a job can go to, by name: one door for the command line and the window's Copy as menu."""

from __future__ import annotations

from ddpstudio.core.jobs.job import Job

ENGINES = ("torchrun", "slurm", "skypilot", "k8s")


def render(engine: str, job: Job, *, accelerator: str = "A100", image: str = "") -> str:
    """The text of ``job`` for ``engine`` (one of ENGINES); ``accelerator``: SkyPilot's GPU type, ``image``:
    the Kubernetes container image."""
    from ddpstudio.core.jobs import k8s, skypilot, slurm, torchrun

    if engine == "skypilot":
        return skypilot.render(job, accelerator)
    if engine == "k8s":
        return k8s.render(job, image)
    return {"torchrun": torchrun.render, "slurm": slurm.render}[engine](job)
