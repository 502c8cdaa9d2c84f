"""Rank 1 reports a real error, then takes a while to exit (its teardown); rank 0 trains until stopped.

A Stop pressed between rank 1's error and its exit must not hide the error (issue 19, item 8). The
error goes out the way the built-in recipe reports one: an ``error`` event in the rank's events file.
"""

import sys
import time

from ddpstudio.core import protocol
from ddpstudio.rank.emit import Emitter, rank_from_env

MESSAGE = "RuntimeError: CUDA error: an illegal memory access was encountered"

if rank_from_env() == 1:
    emitter = Emitter(1)
    emitter.emit(protocol.ERROR, message=MESSAGE)
    emitter.close()
    print(f"Traceback (most recent call last):\n  ...\n{MESSAGE}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:  # tearing down: a stop asked meanwhile changes nothing
        try:
            time.sleep(0.05)
        except KeyboardInterrupt:
            pass
    sys.exit(1)
try:
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    sys.exit(3)
