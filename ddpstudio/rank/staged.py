"""The staged gradient exchange: DDP buckets all-reduced in CPU memory with Gloo, never on the GPU.

Gloo's all-reduce of a CUDA tensor dies with an access violation on Windows
builds (pytorch #186535: ``ProcessGroupGlooCuda.cpp`` is compiled only
``if(NOT WIN32)``), and DDP's reducer all-reduces each gradient bucket on the
device of the parameters. The hook here copies each bucket into a reused
(pinned, when CUDA) CPU buffer, averages it there, and copies it back. It
returns Gloo's future, chained, so DDP keeps overlapping buckets with the
backward pass as far as Gloo allows. The hook API is torch's
``ddp_comm_hooks/default_hooks.py``: ``hook(state, bucket) -> Future[Tensor]``.

Optional fp16 compression (either mode): the bucket travels as float16 (half
the bytes) and is cast back, so the result is approximate.

Every other all-reduce a rank makes (the recipe's, the evaluation's, a user
script's through the rank helper) goes through :func:`all_reduce`, the one
door that stages a CUDA tensor when the exchange is ``staged``.
"""

# No ``from __future__ import annotations``: DDP compares the hook's annotations with the real
# objects (dist.GradBucket, Future[Tensor]) and rejects strings (torch/nn/parallel/distributed.py).
import os
from typing import Any

import torch
import torch.distributed as dist

STAGED, NATIVE, FP16 = "staged", "native", "fp16"  # core.exchange.choice's values
# "1": copy CPU buckets too, the path a CUDA bucket takes (the seam tests without a GPU use).
STAGE_CPU_ENV = "DDPSTUDIO_STAGE_CPU_BUCKETS"


class StagedState:
    """The hook's state: the process group, one reused CPU buffer per bucket index, the copy-up stream."""

    def __init__(self, group: Any = None, fp16: bool = False, stage_cpu: bool | None = None) -> None:
        self.group = group
        self.fp16 = fp16
        self.stage_cpu = os.environ.get(STAGE_CPU_ENV) == "1" if stage_cpu is None else stage_cpu
        self.buffers: dict[int, torch.Tensor] = {}
        self._up: Any = None

    def buffer(self, index: int, like: torch.Tensor) -> torch.Tensor:
        """A CPU buffer for bucket ``index``; reallocated only when the bucket's size or type changes.

        DDP rebuilds its buckets once after the first step, so sizes settle then.
        """
        dtype = torch.float16 if self.fp16 else like.dtype
        buf = self.buffers.get(index)
        if buf is None or buf.numel() != like.numel() or buf.dtype != dtype:
            pin = like.is_cuda  # pinned memory makes the device copies DMA; pointless on the CPU
            buf = torch.empty(like.numel(), dtype=dtype, pin_memory=pin)
            self.buffers[index] = buf
        return buf

    def up_stream(self, device: torch.device) -> Any:
        """The side stream results travel up on, made once: on the compute stream a copy up would wait
        behind every kernel of the backward pass queued by then."""
        if self._up is None:
            self._up = torch.cuda.Stream(device=device)
        return self._up


def stage(state: StagedState, index: int, grad: torch.Tensor, world: int) -> torch.Tensor:
    """Bucket ``index`` divided by the world size, in its CPU buffer (the copy waits for the bucket).

    The arithmetic stays on the bucket's device, in its precision: the division in
    place (DDP overwrites the bucket with the result, and torch's ``allreduce_hook``
    divides in place too), then the float16 cast, so the copy down moves half the
    bytes and the CPU never divides or converts float16 values. Dividing first
    keeps float16 sums from overflowing.
    """
    flat = grad.view(-1)
    flat.div_(world)
    buf = state.buffer(index, grad)
    buf.copy_(flat.to(buf.dtype) if grad.is_cuda else flat)  # blocking: Gloo reads the buffer next
    return buf


def _launch(state: StagedState, grad: torch.Tensor, buf: torch.Tensor, group: Any) -> torch.futures.Future:
    """Start ``buf``'s all-reduce; the returned future completes once the result is back in ``grad``."""
    def copy_up(done: torch.futures.Future) -> torch.Tensor:  # runs in Gloo's thread; an error fails the future
        done.value()  # re-raises a failed all-reduce
        _copy_up(state, grad, buf)
        return grad

    return dist.all_reduce(buf, group=group, async_op=True).get_future().then(copy_up)


def _copy_up(state: StagedState, grad: torch.Tensor, buf: torch.Tensor) -> None:
    """The averaged buffer back into the bucket; on CUDA up in the buffer's precision, cast on the device,
    and waited for, so the values are there before DDP reads them on whichever stream it reads them."""
    flat = grad.view(-1)
    if not grad.is_cuda:
        flat.copy_(buf)
        return
    with torch.cuda.stream(state.up_stream(grad.device)):
        same = buf.dtype == flat.dtype
        flat.copy_(buf if same else buf.to(grad.device, non_blocking=True), non_blocking=True)
        torch.cuda.current_stream(grad.device).synchronize()


def staged_hook(state: StagedState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Copy the bucket to CPU memory, average it there with Gloo, copy it back into the bucket.

    A full-precision bucket that already lives in CPU memory is averaged in
    place: a copy would change nothing but the cost (so on the CPU staged costs
    only the hook; fp16 still goes through the float16 buffer). Each all-reduce
    starts from the thread that runs DDP's hooks, in bucket order, so every rank
    issues its collectives in the same order.
    """
    grad = bucket.buffer()
    group = state.group if state.group is not None else dist.group.WORLD
    if not (grad.is_cuda or state.fp16 or state.stage_cpu):
        grad.div_(group.size())
        return dist.all_reduce(grad, group=group, async_op=True).get_future().then(lambda fut: fut.value()[0])
    buf = stage(state, bucket.index(), grad, group.size())
    return _launch(state, grad, buf, group)


def solo_hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """One rank: the bucket already is the average, handed back at once.

    Staging it would copy every gradient to the CPU and back for nothing: on an
    H200, resnet50 at 224 px with one rank ran at 0.787 of the tight loop staged
    and 0.943 with this hook (benchmarks/recipe_ladder.py).
    """
    done: torch.futures.Future = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def hook_for(mode: str, compression: str = "none", group: Any = None) -> tuple[Any, Any] | None:
    """The (state, hook) ``mode``/``compression`` need, or ``None`` for DDP's own all-reduce.

    ``native`` with fp16 uses torch's ``fp16_compress_hook`` (which all-reduces
    on the gradients' device); ``native`` without compression needs no hook.
    ``staged`` with a single rank (a one-GPU run on Windows) has nothing to
    exchange: :func:`solo_hook`, exact, so float16 rounding is skipped too.
    """
    fp16 = compression == FP16
    if mode == STAGED:
        if dist.get_world_size(group) == 1:
            return None, solo_hook
        return StagedState(group, fp16), staged_hook
    if fp16:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook

        return group, fp16_compress_hook
    return None


def register(model: Any, mode: str, compression: str = "none", group: Any = None) -> str:
    """Register the hook ``mode``/``compression`` need on a DDP model; returns the mode it runs."""
    chosen = hook_for(mode, compression, group)
    if chosen is not None:
        model.register_comm_hook(*chosen)
    return STAGED if mode == STAGED else NATIVE


class StagedWork:
    """What an ``async_op`` staged all-reduce returns: waits, then copies the result back."""

    def __init__(self, work: Any, tensor: torch.Tensor, staged: torch.Tensor) -> None:
        self._work, self._tensor, self._staged = work, tensor, staged
        self._copied = False

    def _copy_back(self) -> None:
        if not self._copied:
            self._tensor.copy_(self._staged)
            self._copied = True

    def wait(self, timeout: Any = None) -> bool:
        ok = self._work.wait() if timeout is None else self._work.wait(timeout)
        self._copy_back()
        return ok

    def is_completed(self) -> bool:
        return self._work.is_completed()

    def is_success(self) -> bool:
        return self._work.is_success()

    def get_future(self) -> torch.futures.Future:
        def done(fut: torch.futures.Future) -> list[torch.Tensor]:
            fut.value()
            self._copy_back()
            return [self._tensor]

        return self._work.get_future().then(done)


def staged_all_reduce(tensor: torch.Tensor, op: Any = dist.ReduceOp.SUM, group: Any = None,
                      async_op: bool = False, *, reduce: Any = None) -> Any:
    """``dist.all_reduce`` of a (CUDA) tensor done on a CPU copy; ``reduce`` is the real all-reduce."""
    reduce = reduce or dist.all_reduce
    staged = tensor.detach().to("cpu", copy=True)
    work = reduce(staged, op=op, group=group, async_op=async_op)
    if async_op:
        return StagedWork(work, tensor, staged)
    tensor.copy_(staged)
    return work


def needs_staging(tensor: Any, group: Any = None) -> bool:
    """A CUDA tensor about to be all-reduced by Gloo: the case pytorch #186535 crashes on."""
    if not isinstance(tensor, torch.Tensor) or not tensor.is_cuda:
        return False
    try:
        return dist.get_backend(group) == "gloo"
    except (RuntimeError, ValueError):
        return False


def all_reduce(tensor: torch.Tensor, exchange: str, op: Any = dist.ReduceOp.SUM, group: Any = None,
               async_op: bool = False, *, reduce: Any = None) -> Any:
    """The one door for every all-reduce a rank makes outside DDP's bucket hook (the recipe's loss mean,
    the evaluation's totals, a user script's calls through the rank helper); ``reduce`` is the real one.

    With the ``staged`` exchange a CUDA tensor on a Gloo group goes through a CPU copy (pytorch #186535:
    no kCUDA all-reduce in Windows builds, an access violation instead); everything else is handed to
    ``reduce`` (default ``dist.all_reduce``, looked up at the call) as it is. tests/test_rank_collectives.py
    checks by AST that nothing under ddpstudio/rank all-reduces any other way.
    """
    reduce = reduce or dist.all_reduce
    if exchange == STAGED and needs_staging(tensor, group):
        return staged_all_reduce(tensor, op, group, async_op, reduce=reduce)
    return reduce(tensor, op=op, group=group, async_op=async_op)
