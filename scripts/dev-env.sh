#!/usr/bin/env bash
# Creates .venv with DDP Studio and its pinned PyTorch (constraints.txt).
#   bash scripts/dev-env.sh          the app (enough for 'ddpstudio run --demo')
#   bash scripts/dev-env.sh --test   plus the test tools, and makensis/7z for the installer tests
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
extras=""
if [ "${1:-}" = "--test" ]; then
  extras="[test]"
  # The installer tests build a real NSIS installer and list it with 7z (Debian packages).
  if ! command -v makensis >/dev/null || ! command -v 7z >/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      echo "installing nsis and p7zip-full (installer tests)..."
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nsis p7zip-full >/dev/null
    else
      echo "note: makensis/7z missing and cannot be installed here; installer tests will fail" >&2
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
.venv/bin/python -c "import ddpstudio, torch; print('ready: ddpstudio', ddpstudio.__version__, '/ torch', torch.__version__)"
