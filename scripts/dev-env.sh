#!/usr/bin/env bash
# Creates .venv with DDP Studio and its pinned PyTorch (constraints.txt).
#   bash scripts/dev-env.sh          the app (enough for 'ddpstudio run --demo')
#   bash scripts/dev-env.sh --test   plus the test tools, makensis/7z/wine/mingw-w64 for the installer tests,
#                                    ShellCheck and SLURM for the cluster exports' tests
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
extras=""
if [ "${1:-}" = "--test" ]; then
  extras="[test]"
  # The installer tests build a real NSIS installer, list it with 7z, and run it under
  # Wine with stand-in uv.exe/python.exe built by mingw-w64 (Debian packages).
  missing=""
  command -v makensis >/dev/null || missing="$missing nsis"
  command -v 7z >/dev/null || missing="$missing p7zip-full"
  command -v wine >/dev/null || missing="$missing wine64 wine"  # wine: the /usr/bin/wine launcher (only recommended by wine64)
  command -v x86_64-w64-mingw32-gcc >/dev/null || missing="$missing gcc-mingw-w64-x86-64"
  # The cluster exports (issue 26): ShellCheck reads every exported script; a one-node SLURM runs the sbatch one.
  command -v shellcheck >/dev/null || missing="$missing shellcheck"
  command -v /usr/sbin/slurmd >/dev/null || missing="$missing slurmctld slurmd slurm-client munge"
  if [ -n "$missing" ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      echo "installing$missing (installer tests)..."
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
      # shellcheck disable=SC2086
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
      echo "note:$missing missing and cannot be installed here; the installer tests skip or fail" >&2
    fi
  fi
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
echo "installing DDP Studio$extras with torch 2.14.1 (about 1.5 minutes the first time)..."
log=$(mktemp)
if ! .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".$extras" 2>"$log"; then
  cat "$log" >&2; rm -f "$log"; exit 1
fi
# This machine's pip mirror config names folders that may not exist: drop those warnings only.
grep -v "^WARNING: Location .* is ignored" "$log" >&2 || true
rm -f "$log"
# The package's bytecode, written once here: an editable install leaves it to each process, and where
# PYTHONDONTWRITEBYTECODE is set (this project's machines) every launcher, CLI and rank would compile
# the modules it imports again (about 0.3 s of CPU per two-rank run, 4 %: docs/testing.md).
.venv/bin/python -m compileall -q ddpstudio >/dev/null
.venv/bin/python -c "import ddpstudio, torch; print('ready: ddpstudio', ddpstudio.__version__, '/ torch', torch.__version__)"
