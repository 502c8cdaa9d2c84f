#!/usr/bin/env bash
# Builds (once; cached in ~/.cache/ddpstudio-wine) the Windows runtime the Wine tier of the tests runs:
# Windows CPython 3.11, PyTorch 2.14.1's Windows build and DDP Studio from this checkout, from PyPI
# packages pinned by version and sha256. Details and every Wine workaround: scripts/wine_env.py.
#   bash scripts/wine-env.sh                 the cached runtime (built if missing); prints its folder
#   bash scripts/wine-env.sh --into DIR      DIR = that runtime plus DDP Studio from this checkout
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
exec "$PYTHON" scripts/wine_env.py "$@"
