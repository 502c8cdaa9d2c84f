"""The Kubernetes export: a Kubeflow Trainer v2 ``TrainJob`` on the ``torch-distributed`` runtime.

The runtime starts ``numNodes`` pods and gives each torchrun's settings as
``PET_*`` variables (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
PET_MASTER_ADDR, PET_MASTER_PORT); torchrun reads every option from
``PET_<OPTION>`` when it is not on the command line (torch/distributed/
argparse_util.py ``env``: "Get argument values from PET_{dest}"), so the
command names only the restarts and the entry. Processes per node come from
``resourcesPerNode`` (Trainer v2.2 removed ``numProcPerNode`` from the Torch
API). Written in JSON's flow style after the comment header, as skypilot.py.
"""

from __future__ import annotations

import json

from ddpstudio.core.jobs import shell
from ddpstudio.core.jobs.job import Job

API_VERSION = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "torch-distributed"


def render(job: Job, image: str = "") -> str:
    shape = job.shape
    cuda = job.plan.device == "cuda"
    script = ["set -euo pipefail", *shell.run_dir_lines(job, f"/tmp/ddpstudio-runs/{job.plan.run_id}"),
              f"exec torchrun --max-restarts {shape.max_restarts} " + job.entry_text('"$RUN_DIR/plan.json"')]
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
    head = shell.header(job, "Kubeflow Trainer", *left, rendezvous=meet)
    return "\n".join(head) + "\n" + json.dumps(resource, indent=2) + "\n"
