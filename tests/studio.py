"""Helpers for tests that run the real ``ddpstudio`` command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

from ddpstudio.core import protocol

SCRIPTS = Path(__file__).parent / "scripts"
# The recipe's cheapest run, for tests that are not about its model: the built-in two-layer perceptron
# on 8x8 images (no torchvision import in the ranks, a gradient of a few thousand numbers).
# "--rendezvous-timeout 60" stays last: test_bad_input takes TINY[-2:] for a script.
TINY = ["--model", "mlp", "--batch-size", "8", "--image-size", "8", "--rendezvous-timeout", "60"]
# A recipe run that trains until it is stopped: the perceptron's 256 steps per epoch take a second or two.
ENDLESS = ["--max-steps", "100000", "--epochs", "100000"]


def sigint_at(handler) -> dict:
    """``Popen`` arguments that start a POSIX child with SIGINT at ``handler`` (``signal.SIG_DFL`` or ``SIG_IGN``).

    A test that sends a child SIGINT must not depend on the shell that started pytest: ``bash run.sh &``,
    nohup and some CI runners start it with SIGINT ignored, an exec keeps an ignored signal ignored, and
    Python then installs no KeyboardInterrupt handler. Windows has no ``preexec_fn``: nothing to set there.
    """
    return {"preexec_fn": partial(signal.signal, signal.SIGINT, handler)} if os.name == "posix" else {}


def ddpstudio(*args: str, timeout: float = 240, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddpstudio", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)


def events(stdout: str) -> list[protocol.Event]:
    parser = protocol.EventParser()
    return [ev for line in stdout.splitlines() for ev in parser.feed(line)]


def of_type(evs: list[protocol.Event], type_: str) -> list[protocol.Event]:
    return [e for e in evs if e.type == type_]


def final(evs: list[protocol.Event]) -> protocol.Event:
    [done] = of_type(evs, protocol.RUN_FINISHED)
    return done


def kill_left(procs) -> None:
    """Kill and reap the processes a test started that are still running (a test that failed midway)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)


def single_rank_child(module: str, function: str, tmp_path: Path, timeout: float = 120):
    """``module.function(store, out)`` in a process of its own (its own process group of one rank on the FileStore
    ``tmp_path/store``), killed if the test fails; what it saved to ``tmp_path/out.pt``."""
    import torch

    code = f"import sys; from {module} import {function}; {function}(*sys.argv[1:])"
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "store"), str(tmp_path / "out.pt")])
    try:
        assert proc.wait(timeout=timeout) == 0
    finally:
        kill_left([proc])
    return torch.load(tmp_path / "out.pt")


def checkpointed_side_by_side(home: Path, procs: dict) -> dict:
    """Runs started side by side under ``home``, each with ``--checkpoint-dir home/ck-NAME``: every one's events
    and last checkpoint once all exited 0. What a failure leaves is killed; none of home's processes is left."""
    import torch

    from tests.conftest import live_processes_of

    results = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-3000:] + out[-3000:]
            state = torch.load(home / f"ck-{name}" / "checkpoint.pt", map_location="cpu", weights_only=True)
            results[name] = {"events": events(out), "checkpoint": state}
    finally:
        kill_left(procs.values())
    assert not live_processes_of(home)
    return results
