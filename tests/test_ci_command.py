"""`.ci/run` runs exactly the README's test command (the second of its first two commands)."""

from __future__ import annotations

import re
import tomllib
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


def test_every_test_fails_alone_before_faulthandler_ends_the_run() -> None:
    """faulthandler_timeout ends the whole run (its last resort for a hang in native code); pytest-timeout
    fails one test. So every test's own limit, the global one and each ``pytest.mark.timeout(N)``, must
    end before faulthandler's, or one slow test (a cold install of torch) takes the run with it."""
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert options["faulthandler_exit_on_timeout"] is True
    marks = [(path.name, int(n)) for path in sorted((ROOT / "tests").glob("*.py"))
             for n in re.findall(r"pytest\.mark\.timeout\((\d+)\)", path.read_text(encoding="utf-8"))]
    assert max(n for _, n in marks) >= 900, marks  # the bootstrap tests' cold install (the case itself)
    late = [(name, n) for name, n in [("global timeout", options["timeout"]), *marks]
            if n >= options["faulthandler_timeout"]]
    assert not late, f"faulthandler_timeout ({options['faulthandler_timeout']} s) would end the run first: {late}"
