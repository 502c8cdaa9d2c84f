"""Records whether Gloo can all-reduce CUDA tensors in the new environment (pytorch #186535).

Runs after verification, in the new environment's own Python, the app's
probe (``python -m ddpstudio.core.exchange.probe --force``), which itself runs
the all-reduce in a further child and caches the answer for the app. The
answer only decides how gradients travel, so nothing here fails the setup: a
probe that crashes, hangs or reports nothing is recorded as such.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from ddpstudio.bootstrap import process
from ddpstudio.core.platform import SAFE_PATH, Platform
from ddpstudio.core.process.exitcodes import describe_exit

MARKER = "DDPSTUDIO-PROBE "  # core.exchange.probe's result line (the bootstrap cannot import core.exchange)
MODULE = "ddpstudio.core.exchange.probe"
# The probe cuts a hung all-reduce off after 180 s; this covers torch's first import on top.
TIMEOUT_S = 600.0


def parse(output: str) -> dict[str, Any] | None:
    """The probe's result, from the last line with the marker that holds a result object."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER):])
            except ValueError:
                continue
            if isinstance(data, dict) and "outcome" in data:
                return data
    return None


def record(
    python: Path,
    platform: Platform,
    on_line: Callable[[str], None],
    env: dict[str, str] | None,
    running: process.Running | None = None,
    command: Sequence[str | os.PathLike[str]] | None = None,
) -> dict[str, Any]:
    """What to store under ``gloo_cuda_all_reduce`` in the setup record. Never raises.

    ``outcome`` is one of the probe's values, or None when the probe itself did not report.
    """
    command = command or [python, SAFE_PATH, "-m", MODULE, "--force"]
    try:
        result = process.run(command, platform, lambda line: None if line.startswith(MARKER) else on_line(line),
                             env=env, timeout=TIMEOUT_S, running=running)
    except OSError as exc:
        return {"outcome": None, "detail": f"the probe could not start: {exc}"}
    found = parse(result.output)
    if found is not None:
        keep = ("outcome", "detail", "exit", "hung", "gpus", "key", "t", "duration_s", "sentence")
        return {k: found[k] for k in keep if k in found}
    if result.timed_out:
        ended = f"did not finish in {TIMEOUT_S:g} s"
    else:
        ended = describe_exit(result.returncode, platform)
    last = next((ln.strip() for ln in reversed(result.output.splitlines()) if ln.strip()), "")
    return {"outcome": None, "detail": f"the probe did not report ({ended})" + (f": {last}" if last else "")}
