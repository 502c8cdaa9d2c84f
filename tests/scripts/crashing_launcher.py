"""The real launcher with a bug in its loop: its first turn raises, once the ranks were started.

Run as ``python -m tests.scripts.crashing_launcher PLAN --stdin-control`` (a Session's ``module``):
a launcher crash must still stop the ranks and end the stream with one run_finished.
"""

import sys

from ddpstudio.core.launch import launcher


def _tick(self) -> None:
    raise RuntimeError("a bug in the loop")


launcher.Launcher._tick = _tick
sys.exit(launcher.main())
