"""A test's own deadline on a real process (tests/conftest.py ``killed_after``): a stuck child fails that
test alone, well before pytest-timeout's 300 s, which on Windows ends the whole run (os._exit)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.conftest import PROCESS_DEADLINE_S, killed_after


def test_a_child_that_never_answers_fails_its_test_at_the_deadline():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    t0 = time.monotonic()
    try:
        with pytest.raises(pytest.fail.Exception, match="the silent child .* still running after 1 s: killed"):
            with killed_after(proc, 1, "the silent child"):
                proc.stdout.readline()  # blocks: only the deadline ends it
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - t0 < 30
    assert proc.wait(10) is not None
    assert PROCESS_DEADLINE_S < 300  # pytest-timeout's, in pyproject.toml
