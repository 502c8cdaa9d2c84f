"""A rank that died natively in a Gloo run on CUDA tensors: say what it probably was.

On Windows such a death is the signature of pytorch #186535 (Gloo's
all-reduce of CUDA tensors dereferences a missing registry entry). ``auto``
exchange should have prevented it, so the cached probe answer that allowed
it is dropped: the next run probes again.
"""

from __future__ import annotations

from ddpstudio.core.exchange import probe
from ddpstudio.core.platform import Platform
from ddpstudio.core.process.exitcodes import is_native_crash

STAGED = "staged"  # the exchange mode that keeps CUDA tensors away from Gloo's all-reduce
ISSUE = probe.ISSUE


def gloo_cuda_crash_note(backend: str, device: str, grad_exchange: str | None, exit_code: int | None,
                         platform: Platform) -> str | None:
    """The note for a rank that crashed natively with Gloo on CUDA and the native exchange, else None.

    Also invalidates the cached probe result (it said, or was taken to say, that this was safe).
    """
    if backend != "gloo" or device != "cuda" or grad_exchange == STAGED:
        return None
    if not is_native_crash(exit_code, platform):
        return None
    probe.invalidate()
    if platform.is_windows:
        cause = f"Gloo cannot all-reduce CUDA tensors in this PyTorch build ({ISSUE})"
    else:
        cause = f"it may be Gloo failing to all-reduce CUDA tensors (as {ISSUE} does on Windows)"
    return (f"the rank crashed inside PyTorch or a native library; {cause}. "
            f"--grad-exchange {STAGED} avoids it by all-reducing gradients on the CPU")
