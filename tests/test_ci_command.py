"""`.ci/run` runs exactly the README's test command (the second of its first two commands)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README.md has no ```bash block with its two commands"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    commands = _readme_commands()
    assert len(commands) == 2, commands
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert ci == [commands[1]]


def test_the_test_command_shows_where_the_time_goes() -> None:
    assert "--durations=15" in _readme_commands()[1]
