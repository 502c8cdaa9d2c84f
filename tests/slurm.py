"""A real one-node SLURM cluster for a test: munged, slurmctld and slurmd (Debian's slurm-wlm 22.05) started
in a private folder with their own key, ports and configuration, and stopped afterwards.

Nothing of the machine's own SLURM or munge setup is used or changed: the
daemons read ``slurm.conf`` from the folder (``SLURM_CONF`` for the clients),
talk through a munge socket there (``AuthInfo=socket=``), listen on free
loopback ports; the one node is this machine under its host name, which
resolves here as a cluster's node names do there (the export's head node is
``scontrol show hostnames``' first name).
slurmd runs jobs as their user, so it needs root; without root or the packages
the test skips, saying so. The node declares 8 GPUs (a GRES over empty stand-in
device files in the folder), so ``sbatch --test-only`` judges a GPU job's directives.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from ddpstudio.core.rendezvous.ports import find_free_port

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "sinfo", "srun", "scontrol")
NODE = socket.gethostname().split(".")[0]
START_S = 60


def missing() -> str | None:
    """Why no cluster can be started here, or None."""
    absent = [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name, path="/usr/sbin:" + os.environ["PATH"])
              is None]
    if absent:
        return f"SLURM is not installed ({', '.join(absent)} missing: apt-get install slurmctld slurmd slurm-client)"
    if os.geteuid() != 0:
        return "slurmd runs jobs as their user and needs root"
    return None


@dataclass
class Cluster:
    folder: Path
    env: dict[str, str]  # SLURM_CONF for the clients
    procs: list[subprocess.Popen]

    def run(self, *args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env={**self.env, **kw.pop("env", {})}, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, **kw)

    def wait_job(self, job_id: str, timeout: float) -> str:
        """``scontrol show job``'s text once the job has ended (any state but pending, running, completing).

        Not ``sbatch --wait``: it polls at growing intervals, up to 10 s (src/sbatch/sbatch.c ``_job_wait``),
        so it returns up to 10 s after a short job ended; this asks every half second."""
        deadline = time.monotonic() + timeout
        while True:
            shown = self.run("scontrol", "show", "job", job_id).stdout
            state = next((word.split("=", 1)[1] for word in shown.split() if word.startswith("JobState=")), "")
            if state and state not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {state or 'unknown'} after {timeout:g} s:\n{shown}")
            time.sleep(0.5)


def _config(folder: Path, cpus: int) -> str:
    ctl_port, node_port = find_free_port(), find_free_port()
    return "\n".join([
        "ClusterName=ddpstudio-test", f"SlurmctldHost={NODE}(127.0.0.1)", f"SlurmctldPort={ctl_port}",
        f"SlurmdPort={node_port}", "AuthType=auth/munge", f"AuthInfo=socket={folder}/munge.sock",
        "CredType=cred/munge", "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={folder}/state",
        f"SlurmdSpoolDir={folder}/spool", f"SlurmctldPidFile={folder}/slurmctld.pid",
        f"SlurmdPidFile={folder}/slurmd.pid", f"SlurmctldLogFile={folder}/slurmctld.log",
        f"SlurmdLogFile={folder}/slurmd.log",
        # No cgroups in a container: processes are tracked by their parent, tasks are not bound.
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU", "SchedulerType=sched/builtin", "JobCompType=jobcomp/none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none", "ReturnToService=2", "GresTypes=gpu",
        f"NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} Gres=gpu:8 State=UNKNOWN",
        f"PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP", ""])


def start(cpus: int = 2) -> Cluster:
    """The daemons started and the node idle; raises RuntimeError with their logs when it does not come up."""
    # A short folder: the munge socket's path must fit a sockaddr_un (108 bytes).
    folder = Path(tempfile.mkdtemp(prefix="slurm-"))
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    (folder / "slurm.conf").write_text(_config(folder, cpus), encoding="utf-8")
    for i in range(8):  # stand-in device files: slurmd counts a GPU per File, and never opens them here
        (folder / f"gpu{i}").touch()
    (folder / "gres.conf").write_text(f"NodeName={NODE} Name=gpu File={folder}/gpu[0-7]\n", encoding="utf-8")
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    sbin = "/usr/sbin"
    commands = [[f"{sbin}/munged", "-F", "-f", f"--socket={folder}/munge.sock", f"--key-file={key}",
                 f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
                 f"--seed-file={folder}/munged.seed"],
                [f"{sbin}/slurmctld", "-D", "-i", "-f", str(folder / "slurm.conf")],
                [f"{sbin}/slurmd", "-D", "-f", str(folder / "slurm.conf")]]
    cluster = Cluster(folder, env, [])
    for command in commands:
        with open(folder / f"{Path(command[0]).name}.out", "w") as out:
            cluster.procs.append(subprocess.Popen(command, env=env, cwd=folder, stdout=out, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, start_new_session=True))
        if command[0].endswith("munged"):
            _wait(lambda: (folder / "munge.sock").exists(), cluster, "munged made no socket")
    _wait(lambda: cluster.run("sinfo", "-h", "-n", NODE, "-o", "%t").stdout.strip() == "idle", cluster,
          "the node never became idle")
    return cluster


def _wait(ready, cluster: Cluster, what: str) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if ready():
            return
        if any(p.poll() is not None for p in cluster.procs):
            break
        time.sleep(0.5)
    logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                     for p in sorted(cluster.folder.glob("*.out")) + sorted(cluster.folder.glob("*.log")))
    stop(cluster)
    raise RuntimeError(f"SLURM did not start: {what}\n{logs}")


def stop(cluster: Cluster) -> list[str]:
    """Each daemon (newest first) and whatever it started: SIGTERM, 10 s, then SIGKILL; the folder removed.
    Returns what was still running after that, described (the test asserts it is empty)."""
    left = []
    for proc in reversed(cluster.procs):
        try:
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        _, alive = psutil.wait_procs(tree, timeout=10)
        for p in alive:
            left.append(f"{p.pid} {p.name()}")
            p.kill()
    shutil.rmtree(cluster.folder, ignore_errors=True)
    return left
