"""Each export read by what will read it (issue 26): bash and ShellCheck for every shell script an export holds
(torchrun's, SLURM's, the SkyPilot task's run section, the TrainJob's command), a YAML parser for the two
documents, Kubeflow Trainer's own API models for the TrainJob, and SkyPilot's task schema for the task."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml
from kubeflow_trainer_api.models.trainer_v1alpha1_train_job import TrainerV1alpha1TrainJob

from ddpstudio.cli.main import main
from tests.test_export_job import TRAIN

GPUS = ["--nodes", "2", "--gpus-per-node", "4", "--device", "cuda"]
EXPORTS = {
    "torchrun, --host": ["--to", "torchrun", "--host", "10.0.0.1", *GPUS],
    "torchrun, HEAD_NODE": ["--to", "torchrun", *GPUS],
    "slurm, GPUs": ["--to", "slurm", *GPUS],
    "slurm, CPUs": ["--to", "slurm", "--nodes", "2"],
    "skypilot": ["--to", "skypilot", "--accelerator", "H100", *GPUS],
    "k8s": ["--to", "k8s", "--image", "registry.example/ddp:1", *GPUS],
}
# An args-style script: torchrun starts 'sh -c' per rank, which fills the template from RANK (core/jobs/job.py).
ARGS_SCRIPT = ["run", "--script", "/cluster/it's here/train.py", "--script-style", "args", "--dist-args",
               "--rank {rank} --world-size {world_size} --url {url}", "--", "--tag", "a b"]
# The top-level keys of SkyPilot's task schema (skypilot 0.14.1, sky/utils/schemas.py get_task_schema:
# 'additionalProperties': False over these properties; docs.skypilot.co reference/yaml-spec).
SKYPILOT_TASK_KEYS = {"name", "workdir", "event_callback", "num_nodes", "resources", "file_mounts", "service", "pool",
                      "setup", "run", "envs", "secrets", "managed_secrets", "inputs", "outputs",
                      "file_mounts_mapping", "config", "volumes", "volume_mounts", "api_server_access", "_metadata"}
# A Kubernetes object name that is also a DNS label (RFC 1123), as the JobSet and pods made from a TrainJob need.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def exported(capsys, *args: str) -> str:
    assert main(["export-job", *args]) == 0
    return capsys.readouterr().out


def scripts_of(engine: str, text: str) -> list[str]:
    """The shell an export holds: the file itself, or the script inside the YAML document."""
    if engine == "skypilot":
        return [yaml.safe_load(text)["run"]]
    if engine == "k8s":
        command = yaml.safe_load(text)["spec"]["trainer"]["command"]
        assert command[:2] == ["bash", "-c"]
        return [command[2]]
    return [text]


@pytest.mark.parametrize("source", ["recipe", "args-style script"])
@pytest.mark.parametrize("case", EXPORTS)
def test_every_exported_script_is_bash_that_shellcheck_passes(case, source, capsys, studio_home):
    args = EXPORTS[case]
    for script in scripts_of(args[1], exported(capsys, *args, *(TRAIN if source == "recipe" else ARGS_SCRIPT))):
        syntax = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert syntax.returncode == 0, syntax.stderr
        if shutil.which("shellcheck") is None:
            pytest.skip("shellcheck is not installed (apt-get install shellcheck; scripts/dev-env.sh --test does)")
        # Warnings and errors only: the notes (style, info) are about choices such as one export per line.
        check = subprocess.run(["shellcheck", "--shell=bash", "--severity=warning", "-"], input=script,
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout


def test_a_torchrun_script_without_host_stops_and_names_head_node(tmp_path, capsys, studio_home):
    job = tmp_path / "job.sh"
    job.write_text(exported(capsys, *EXPORTS["torchrun, HEAD_NODE"], *TRAIN))
    env = {"PATH": "/usr/bin:/bin", "DDPSTUDIO_RUN_DIR": str(tmp_path / "run")}  # no HEAD_NODE
    done = subprocess.run(["bash", str(job)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert "HEAD_NODE: set HEAD_NODE to the address of the first node" in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()  # it stopped before writing anything


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_the_trainjob_is_read_whole_by_kubeflow_trainers_api_models(device, capsys, studio_home):
    text = exported(capsys, "--to", "k8s", "--nodes", "3", "--gpus-per-node", "8", "--device", device, *TRAIN)
    document = yaml.safe_load(text)  # the whole file, comment header included, as kubectl reads it
    assert document == json.loads("\n".join(line for line in text.splitlines() if not line.startswith("#")))
    job = TrainerV1alpha1TrainJob.from_dict(document)  # Kubeflow Trainer's generated models (kubeflow-trainer-api)
    assert job.to_dict() == document  # nothing the API lacks (it would be dropped), every type as the API's
    assert (job.api_version, job.kind, job.spec.runtime_ref.name) == ("trainer.kubeflow.org/v1alpha1", "TrainJob",
                                                                      "torch-distributed")
    name = job.metadata.name
    assert DNS_LABEL.match(name) and len(name) <= 63, name
    limits = job.to_dict()["spec"]["trainer"]["resourcesPerNode"]["limits"]
    assert limits == ({"nvidia.com/gpu": 8} if device == "cuda" else {"cpu": 8})


def test_the_kubeflow_check_catches_a_field_the_api_lacks(capsys, studio_home):
    document = yaml.safe_load(exported(capsys, "--to", "k8s", *TRAIN))
    document["spec"]["trainer"]["elasticPolicy"] = {"maxRestarts": 3}  # gone from the Torch API in Trainer v2.2
    assert TrainerV1alpha1TrainJob.from_dict(document).to_dict() != document


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_the_skypilot_task_has_only_keys_of_skypilots_task_schema(device, capsys, studio_home):
    text = exported(capsys, "--to", "skypilot", "--nodes", "2", "--gpus-per-node", "4", "--device", device,
                    "--accelerator", "H100", *TRAIN)
    task = yaml.safe_load(text)
    assert set(task) <= SKYPILOT_TASK_KEYS, set(task) - SKYPILOT_TASK_KEYS
    assert isinstance(task["name"], str) and isinstance(task["run"], str) and task["num_nodes"] == 2
    assert task["resources"] == ({"accelerators": "H100:4"} if device == "cuda" else {})
