"""A failed rank's last words, and what they probably mean.

The message is the rank's last error line (``StderrTail.message``), with
what we know about it in front: a busy hard-coded port and its holder
(``busyport``), a native crash with Gloo on CUDA (pytorch #186535,
``exchange.crash``), or Gloo's abort while a trained script rank exited
(pytorch PR #179291, ``exitabort``).
"""

from __future__ import annotations

from ddpstudio.core.exchange.crash import gloo_cuda_crash_note
from ddpstudio.core.launch.busyport import busy_port_note
from ddpstudio.core.launch.exitabort import gloo_exit_abort_note
from ddpstudio.core.launch.rankproc import RankProc
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import Platform


def crash_message(plan: Plan, r: RankProc, code: int, platform: Platform) -> str:
    """The rank's last words; for a native crash with Gloo on CUDA, what it probably was (pytorch #186535)."""
    message = r.stderr.message()
    busy = busy_port_note("\n".join(r.stderr.tail(40)), ours=plan.master_port)
    if busy:
        message = f"{busy} ({message})" if message else busy
    p = plan
    note = gloo_cuda_crash_note(p.backend, p.device, getattr(p, "grad_exchange", None), code, platform)
    if note is None and p.script is not None:
        note = gloo_exit_abort_note(message, code, r.trained, p.rank_helper, platform)
    if note is None:
        return message
    return f"{note} (last output: {message})" if message else note
