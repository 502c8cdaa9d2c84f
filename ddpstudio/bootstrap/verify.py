"""Checks a freshly installed environment: torch imports, CUDA, Gloo, the app.

The check runs in the new environment's own Python (the bootstrap's Python
has no torch) and reports one JSON line. Gloo is tried for real: a one-rank
group on a fresh FileStore, bound to the loopback address so a VPN or
Hyper-V adapter cannot break it (pytorch#77523), and one all_reduce.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ddpstudio.bootstrap import failure, process
from ddpstudio.bootstrap.cuda_index import TorchBuild
from ddpstudio.core.platform import Platform

MARKER = "DDPSTUDIO-VERIFY "
# The first import of torch on Windows can take minutes while antivirus scans its DLLs.
TIMEOUT_S = 600.0

CHECK_SCRIPT = r"""
import datetime, json, os, shutil, sys
result = {"python": sys.version.split()[0]}
import torch
import torch.distributed as dist
result["torch"] = torch.__version__
result["torch_cuda"] = torch.version.cuda
result["cuda_available"] = bool(torch.cuda.is_available())
result["gpu_count"] = torch.cuda.device_count() if result["cuda_available"] else 0
result["gpus"] = [torch.cuda.get_device_name(i) for i in range(result["gpu_count"])]
# A build can see a GPU it has no kernels for ("no kernel image is available"): run one op on each.
result["cuda_error"] = None
for i in range(result["gpu_count"]):
    try:
        assert (torch.ones(2, device=f"cuda:{i}") * 2).sum().item() == 4.0
    except Exception as exc:
        result["cuda_error"] = f"{result['gpus'][i]}: {type(exc).__name__}: {exc}".splitlines()[0]
        break
result["gloo_available"] = bool(dist.is_available() and dist.is_gloo_available())
result["gloo_all_reduce"] = False
if result["gloo_available"]:
    # torch's FileStore cannot open a non-ASCII path on Windows (a %TEMP% under C:\Users\Jürgen).
    from ddpstudio.core.platform import current
    from ddpstudio.core.rendezvous.asciipath import safe_temp_folder
    folder = safe_temp_folder("ddpstudio-verify-", current())
    try:
        store = dist.FileStore(os.path.join(folder, "store"), 1)
        options = dist.ProcessGroupGloo._Options()
        options._devices = [dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
        options._timeout = datetime.timedelta(seconds=60)
        group = dist.ProcessGroupGloo(store, 0, 1, options)
        tensor = torch.ones(4)
        group.allreduce([tensor]).wait()
        result["gloo_all_reduce"] = tensor.tolist() == [1.0] * 4
        del group, store
    finally:
        shutil.rmtree(folder, ignore_errors=True)
import ddpstudio
result["app"] = ddpstudio.__version__
print("DDPSTUDIO-VERIFY " + json.dumps(result), flush=True)
"""


def parse(output: str) -> dict[str, Any] | None:
    """The check's JSON result from its output, or None if it never got that far."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER) :])
            except ValueError:
                return None
    return None


def judge(result: dict[str, Any], build: TorchBuild) -> None:
    """Raises the plain-language failure for a result that is not good enough."""
    if not result.get("gloo_available") or not result.get("gloo_all_reduce"):
        raise failure.not_verified("PyTorch's Gloo backend, which DDP needs on Windows, does not work.", json.dumps(result))
    if build.uses_gpu and not result.get("cuda_available"):
        raise failure.not_verified(
            f"the GPU build ({build.tag}) cannot use your NVIDIA GPU. Updating the NVIDIA driver usually fixes this.",
            json.dumps(result),
            cpu_fallback=True,
        )
    if build.uses_gpu and result.get("cuda_error"):
        raise failure.not_verified(
            f"the GPU build ({build.tag}) cannot run on your GPU ({result['cuda_error']}). Very old GPUs are not "
            "supported by current PyTorch builds; the CPU build still works.",
            json.dumps(result),
            cpu_fallback=True,
        )


def verify(
    python: Path,
    build: TorchBuild,
    platform: Platform,
    on_line: Callable[[str], None],
    env: dict[str, str],
    running: process.Running | None = None,
) -> dict[str, Any]:
    """Runs the check with ``python``; returns its result or raises BootstrapFailure."""
    outcome = process.run([python, "-c", CHECK_SCRIPT], platform, on_line, env=env, timeout=TIMEOUT_S, running=running)
    if running is not None and running.cancelled.is_set():
        raise failure.cancelled()
    result = parse(outcome.output)
    if outcome.timed_out:
        raise failure.not_verified("checking PyTorch took longer than 10 minutes.", outcome.output[-2000:])
    if result is None:
        last = next((l for l in reversed(outcome.output.splitlines()) if l.strip()), "no output")
        raise failure.not_verified(f"starting it failed ({last.strip()}).", outcome.output[-4000:])
    judge(result, build)
    return result
