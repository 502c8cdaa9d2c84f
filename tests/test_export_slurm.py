"""The SLURM export under a real SLURM (Debian's slurm-wlm, one node on this machine: tests/slurm.py): sbatch
takes the script's directives, srun and scontrol are SLURM's own, and the recipe trains on 2 CPU ranks over Gloo
under torchrun inside the job (issue 26 prefers this to the stand-ins of test_export_job.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.rendezvous.ports import find_free_port
from tests import slurm
from tests.test_export_job import TRAIN, VENV_BIN, export, rank_events

pytestmark = pytest.mark.skipif(slurm.missing() is not None, reason=str(slurm.missing()))


@pytest.fixture(scope="module")
def cluster():
    """One cluster for the module (its start waits for slurmd to register): the job test and the --test-only
    test, which submits nothing that runs."""
    started = slurm.start()
    yield started
    assert slurm.stop(started) == []  # no daemon, job step or rank of the job is left


@pytest.mark.slow
@pytest.mark.posix_only("SLURM and torchrun's elastic agent run on Linux")
@pytest.mark.timeout(240)
def test_the_sbatch_script_trains_under_real_slurm(tmp_path, studio_home, cluster):
    job = export(tmp_path / "job.sbatch", ["--to", "slurm", "--nodes", "1", "--gpus-per-node", "2", "--port",
                                           str(find_free_port())], TRAIN)
    run_dir = studio_home / "runs" / "from-slurm"
    # sbatch hands the submitting environment to the job (--export=ALL, its default): torchrun from the venv,
    # and PYTHONPATH where a test runs a work tree.
    env = {"PATH": VENV_BIN + os.pathsep + os.environ["PATH"], "DDPSTUDIO_RUN_DIR": str(run_dir)}
    submitted = cluster.run("sbatch", "--parsable", "-o", str(tmp_path / "slurm-%j.out"), str(job), env=env)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    accounting = cluster.wait_job(job_id, 200)
    out = "\n".join(p.read_text(errors="replace") for p in tmp_path.glob("slurm-*.out"))
    assert "JobState=COMPLETED" in accounting and "ExitCode=0:0" in accounting, f"{accounting}\n{out}"
    assert "NumNodes=1" in accounting, accounting

    events = rank_events(run_dir)
    assert sorted(events) == [0, 1]
    losses = [e.get("loss") for e in events[0] if e.type == protocol.GLOBAL_STEP]
    assert len(losses) == 6 and losses[-1] < losses[0]


def test_slurm_accepts_a_gpu_jobs_directives(tmp_path, studio_home, cluster):
    """sbatch --test-only: SLURM reads the #SBATCH lines of a GPU export and says it could start it now."""
    job = export(tmp_path / "job.sbatch", ["--to", "slurm", "--nodes", "1", "--gpus-per-node", "8", "--device",
                                           "cuda"], TRAIN)
    assert "#SBATCH --gpus-per-node=8" in job.read_text()
    done = cluster.run("sbatch", "--test-only", str(job))
    assert done.returncode == 0, done.stderr
    assert "to start at" in done.stderr and f"on nodes {slurm.NODE}" in done.stderr, done.stderr
    refused = cluster.run("sbatch", "--test-only", "--gpus-per-node=9", str(job))  # the check does check
    assert refused.returncode != 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([str(Path(__file__))]))
