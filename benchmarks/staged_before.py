"""The staged hook as it was before issue 20 §3, kept only so benchmarks can time it beside today's.

Each bucket was copied to a pinned CPU buffer with a blocking copy on the
compute stream (the host waited for the device's whole queue at every bucket),
divided on the CPU (in float16 under compression, after a cast made by the
CPU), all-reduced by Gloo as soon as the copy returned, and copied back with a
blocking copy. ``exchange.py --paired`` steps a DDP copy with this hook beside
the current one, so the before/after ratio comes from the same run.
"""

# No ``from __future__ import annotations``: DDP compares the hook's annotations with the real objects.
from typing import Any

import torch
import torch.distributed as dist

LABEL = "staged, blocking copies (before)"


class BeforeState:
    def __init__(self, group: Any = None, fp16: bool = False) -> None:
        self.group, self.fp16 = group, fp16
        self.buffers: dict[int, torch.Tensor] = {}


def before_hook(state: BeforeState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    grad = bucket.buffer()
    group = state.group if state.group is not None else dist.group.WORLD
    dtype = torch.float16 if state.fp16 else grad.dtype
    buf = state.buffers.get(bucket.index())
    if buf is None or buf.numel() != grad.numel() or buf.dtype != dtype:
        buf = state.buffers[bucket.index()] = torch.empty(grad.numel(), dtype=dtype, pin_memory=grad.is_cuda)
    buf.copy_(grad.view(-1))
    buf.div_(group.size())

    def copy_back(fut: torch.futures.Future) -> torch.Tensor:
        fut.value()
        grad.view(-1).copy_(buf)
        return grad

    return dist.all_reduce(buf, group=group, async_op=True).get_future().then(copy_back)
