#!/bin/bash
# One call on a lent GPU machine (docs/performance.md, "Running it on a GPU machine"): install DDP Studio
# from this checkout without network, run benchmarks/gpu.py with its defaults (it keeps to a 290 s budget),
# then the tests that meet the real GPU. Everything it measures lands in OUT (default ./gpu-out).
#
#     bash benchmarks/gpu_session.sh PLATFORMDIRS_WHEEL [OUT]
#
# The wheel is DDP Studio's one dependency such machines lack (psutil and nvidia-ml-py are there). About
# 6 minutes in all on an H200 (2026-11-28: the install 4 s, the tests 50 s).
set -o pipefail
wheel=${1:?give the platformdirs wheel: bash benchmarks/gpu_session.sh platformdirs-X-py3-none-any.whl [OUT]}
out=${2:-${OUT:-gpu-out}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export DDPSTUDIO_HOME=${DDPSTUDIO_HOME:-/tmp/ddpstudio-gpu-home}
start=$(date +%s)
say() { echo "== $1 at +$(( $(date +%s) - start )) s"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/smi.txt"
python3 -m pip install -q --no-index --no-deps --no-build-isolation "$wheel" . > "$out/install.log" 2>&1 \
    || { tail -20 "$out/install.log"; exit 1; }
say installed
timeout 330 python3 benchmarks/gpu.py --json "$out/gpu.json" 2>&1 | tee "$out/gpu.log" | grep -v '^{'
say benchmarked
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_inventory.py tests/test_gpu_sampler.py \
    tests/test_exchange_probe.py tests/test_doctor_probe.py 2>&1 | tee "$out/tests.log" | tail -5
say tested
