"""DDP Studio's own processes never import from the folder a run starts in.

``python -m`` puts the working folder first on ``sys.path``. Started from a folder that holds a ``copy.py``
(or ``random.py``, ``queue.py``: names ML folders do have), the launcher imported it in place of the
standard library's ``copy`` (``dataclasses`` imports it) and died before any rank started: "the launcher ended
without reporting a result (exit code 1)". Every ``python -m ddpstudio...`` we start now runs with ``-P``
(core/launch/interpreter.py ``SAFE_PATH``). A user's script still sees its own folder first, as under plain
``python``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from tests.studio import TINY, events, final

SHADOWS = ("copy", "random", "queue", "types", "json")


@pytest.mark.slow
def test_a_run_started_in_a_folder_with_standard_library_names_trains(studio_home, tmp_path):
    for name in SHADOWS:
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('imported the working folder\\'s {name}.py')\n",
                                             encoding="utf-8")
    # The command users type: the installed console script, which (unlike ``python -m``) adds no working folder.
    [command] = [p for p in (Path(sys.executable).with_name(n) for n in ("ddpstudio", "ddpstudio.exe")) if p.is_file()]
    res = subprocess.run([str(command), "run", "--json", *TINY, "--world-size", "1", "--max-steps", "2"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    assert "imported the working folder" not in res.stdout + res.stderr
    assert final(events(res.stdout)).get("state") == protocol.FINISHED
