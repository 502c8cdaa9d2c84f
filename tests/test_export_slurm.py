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


@pytest.fixture
def cluster():
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
    done = cluster.run("sbatch", "--wait", "--parsable", "-o", str(tmp_path / "slurm-%j.out"), str(job),
                       env=env, timeout=200)
    out = "\n".join(p.read_text(errors="replace") for p in tmp_path.glob("slurm-*.out"))
    assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{out}"
    job_id = done.stdout.strip().split(";")[0]

    events = rank_events(run_dir)
    assert sorted(events) == [0, 1]
    losses = [e.get("loss") for e in events[0] if e.type == protocol.GLOBAL_STEP]
    assert len(losses) == 6 and losses[-1] < losses[0]
    accounting = cluster.run("scontrol", "show", "job", job_id)
    assert "JobState=COMPLETED" in accounting.stdout and "NumNodes=1" in accounting.stdout, accounting.stdout


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
