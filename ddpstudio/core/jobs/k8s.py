"""The Kubernetes export: a Kubeflow Trainer v2 ``TrainJob`` on the ``torch-distributed`` runtime.

The runtime starts ``numNodes`` pods and gives each torchrun's settings as
``PET_*`` variables (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
PET_MASTER_ADDR, PET_MASTER_PORT); torchrun reads every option from
``PET_<OPTION>`` when it is not on the command line (torch/distributed/
argparse_util.py ``env``: "Get argument values from PET_{dest}"), so the
command names only the restarts and the entry. Processes per node come from
``resourcesPerNode`` (Trainer v2.2 removed ``numProcPerNode`` from the Torch
API). Written in JSON's flow style after the comment header, as skypilot.py.

With restarts the pods meet by c10d at PET_MASTER_ADDR:PET_MASTER_PORT, each round on a fresh store
(shell.restart_lines), not by torchrun's default ``static`` rendezvous: torch 2.14.1's
elastic/rendezvous/static_tcp_rendezvous.py ``next_rendezvous`` builds its TCPStore once (``if not
self._store:``) and hands every round ``PrefixStore(self.run_id, self._store)``, the same keys, so a restarted
group can meet on the dead group's Gloo addresses, the hang of pytorch #135712 (seen here: two pods on
loopback, rank 1 killed mid-run, 2 restarts of 4 still stuck 144-146 s after the kill; by c10d 4 of 4
finished, 31-49 s after it), and the fresh-store switch applies to c10d only. The store's host is node rank 0 by ``is_host`` (c10d_rendezvous_backend.py
``cfg_is_host = params.get_as_bool("is_host")``), not by matching the pod's name against PET_MASTER_ADDR.
Without restarts the command stays on the runtime's static settings.
"""

from __future__ import annotations

import json

from ddpstudio.core.jobs import shell
from ddpstudio.core.jobs.job import Job

API_VERSION = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "torch-distributed"


def _rendezvous_words(job: Job) -> str:
    """With restarts, torchrun's c10d options over the runtime's PET_* master (the pod of node rank 0 hosts)."""
    if not job.shape.max_restarts:
        return ""
    return ('--rdzv-backend c10d --rdzv-endpoint "$PET_MASTER_ADDR:$PET_MASTER_PORT" '
            f'--rdzv-id {job.plan.run_id} --rdzv-conf is_host=$((PET_NODE_RANK == 0)) ')


def render(job: Job, image: str = "") -> str:
    shape = job.shape
    cuda = job.plan.device == "cuda"
    script = ["set -euo pipefail", *shell.run_dir_lines(job, f"/tmp/ddpstudio-runs/{job.plan.run_id}"),
              *shell.restart_lines(job), f"exec torchrun {_rendezvous_words(job)}--max-restarts {shape.max_restarts} "
              + job.entry_text('"$RUN_DIR/plan.json"')]
    limits = {"nvidia.com/gpu": shape.procs_per_node} if cuda else {"cpu": shape.procs_per_node}
    trainer = {"numNodes": shape.nodes, "resourcesPerNode": {"limits": limits},
               "command": ["bash", "-c", "\n".join(script) + "\n"]}
    if image:
        trainer["image"] = image
    resource = {"apiVersion": API_VERSION, "kind": "TrainJob",
                "metadata": {"name": f"ddpstudio-{job.plan.run_id}".lower()},
                "spec": {"runtimeRef": {"name": RUNTIME}, "trainer": trainer}}
    left = ["the image with torch and ddpstudio (--image; the runtime's own image lacks ddpstudio) and the "
            "namespace (kubectl apply -n NAMESPACE)",
            "a volume every pod mounts for DDPSTUDIO_RUN_DIR (a PersistentVolumeClaim); the default under /tmp "
            "is each pod's own"]
    meet = (f"rendezvous: the runtime's PET_MASTER_ADDR/PET_MASTER_PORT, PET_NNODES, PET_NPROC_PER_NODE and "
            f"PET_NODE_RANK, read by torchrun; up to {shape.max_restarts} restart(s) of a pod's ranks; the ranks "
            "join with env://")
    if shape.max_restarts:
        meet += (f"; restarts meet by c10d at PET_MASTER_ADDR:PET_MASTER_PORT, each round on a fresh store "
                 f"({shell.FRESH_STORE_ENV}=1): the static rendezvous keeps the first round's store, whose stale "
                 "Gloo addresses can hang a restart (pytorch #135712)")
    head = shell.header(job, "Kubeflow Trainer", *left, rendezvous=meet)
    return "\n".join(head) + "\n" + json.dumps(resource, indent=2) + "\n"
