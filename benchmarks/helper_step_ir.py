"""The rank helper's per-step Python (hang-watch wrappers and optimizer hooks), for counting instructions (issue 20).

    valgrind --tool=cachegrind --cache-sim=no python benchmarks/helper_step_ir.py N wrapped|plain

Runs N "steps" of what the helper adds to a user's training step
(:mod:`ddpstudio.rank.scriptbeat`: the ``DistributedDataParallel.forward``
and ``Tensor.backward`` wrappers around a call that does nothing, and the
two global optimizer-step hooks) or, with ``plain``, the same two calls
unwrapped. ((wrapped N) - (wrapped 1)) - ((plain N) - (plain 1)), divided by
N - 1, is the helper's instructions per step; counts do not move with the
machine's load. Imports no torch: the checkout measured is the ``ddpstudio``
on PYTHONPATH.
"""

import sys

from ddpstudio.rank import scriptbeat
from ddpstudio.rank.heartbeat import Heartbeat


class _Module:
    training = True


def main() -> None:
    n, wrapped = int(sys.argv[1]), sys.argv[2] == "wrapped"
    beat = Heartbeat()
    beat.mark("script", 1)

    def call(*args, **kwargs):
        return None

    def forward(module, *args):
        return None

    module = _Module()
    if not wrapped:
        for _ in range(n):
            forward(module, 1)
            call(1)
        return
    marked_forward = scriptbeat._forward(beat, forward, (1).__bool__)  # grad enabled: a C call, as torch's
    marked_backward = scriptbeat._during(beat, "backward", call)
    begins, ends = scriptbeat._optimizer_begins(beat), scriptbeat._optimizer_ends(beat)
    for _ in range(n):
        marked_forward(module, 1)
        marked_backward(1)
        begins()
        ends()


if __name__ == "__main__":
    main()
