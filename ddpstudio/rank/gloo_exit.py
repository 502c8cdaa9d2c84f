"""A rank that used Gloo must not abort while its interpreter shuts down.

PyTorch's Gloo worker threads (``pt_gloo_runloop``) drop their reference to a
finished collective's work object a moment after the caller's ``wait()``
returns. If that moment falls after the interpreter began to finalize (the
script's last line was an all-reduce, then it returned), the work's tensors are
freed on that thread, which must take the GIL to release their Python objects;
a finalizing interpreter ends the thread instead, through a destructor that may
not throw: ``terminate called without an active exception``, SIGABRT, and a run
that trained to the end is reported as failed. Seen here: gdb on the aborting
rank shows ``ProcessGroupGloo::runLoop`` -> ``~AsyncAllreduceWork`` ->
``TensorImpl::decref_pyobject`` -> ``take_gil`` -> ``pthread_exit`` ->
``std::terminate`` while the main thread is in ``Py_FinalizeEx``. PyTorch's fix
(an atexit hook, pytorch PR #179291) was abandoned.

Waiting a moment in an ``atexit`` hook, while the interpreter is still whole,
lets those threads let go first: 4 aborts in 21 two-rank runs of
tests/scripts/ddp_env_style.py without it, 0 in 21 with it (interleaved, one run).
Standard library only.
"""

from __future__ import annotations

import atexit
import time

SETTLE_S = 0.1
_registered = False


def settle() -> None:
    try:
        time.sleep(SETTLE_S)
    except KeyboardInterrupt:  # a stop that arrives as the rank ends: it is ending anyway
        pass


def settle_at_exit() -> None:
    """Register :func:`settle` once per process (atexit hooks run before finalization, last in first out)."""
    global _registered
    if not _registered:
        _registered = True
        atexit.register(settle)
