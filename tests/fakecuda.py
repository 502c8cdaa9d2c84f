"""A CUDA device for tests on a machine without one: the hardware edge, faked through torch's own extension point.

Why this and not something simpler: the question a test must answer is "does the rank's code hand
Gloo a CUDA tensor?" (pytorch #186535), and on a CPU-only machine every tensor is a CPU tensor, so a
recorder that looks at ``tensor.is_cuda`` would pass whatever the code did. Faking a torch function
that does not exist, or passing ``device="cuda"`` through a seam the product must honour, would test
a stand-in, not the code. ``torch.overrides.TorchFunctionMode`` (a public torch API) sees every torch
call made while it is active, property reads included (``Tensor.device.__get__``,
``Tensor.is_cuda.__get__``: ``torch/overrides.py`` lists them in ``get_testing_overrides``). So
:class:`FakeCuda` lets the real code run unchanged: a tensor asked for on ``cuda`` is made in CPU
memory and marked; whatever a torch op computes from a marked tensor is marked; ``.to("cpu")`` and
``.cpu()`` give an unmarked copy; a marked tensor says it lives on ``cuda:0``. The code under test
then takes exactly the decisions it would take on a GPU (``tensor.is_cuda``), and a recorder on the
real ``dist.all_reduce`` can tell, through the same property, which device the tensor it was handed
"lives" on. What it does not model: streams, pinned memory, mixing devices in one op (real CUDA
raises; here it computes).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

MARK = "_fake_cuda"
DEVICE = torch.device("cuda", 0)
_GETTERS = {torch.Tensor.device.__get__: lambda t: DEVICE, torch.Tensor.is_cuda.__get__: lambda t: True,
            torch.Tensor.is_cpu.__get__: lambda t: False, torch.Tensor.get_device: lambda t: 0}
_TO_CPU = {torch.Tensor.cpu}
_TO_CUDA = {torch.Tensor.cuda}


def on_fake_cuda(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and getattr(value, MARK, False)


def _is_cuda(device: Any) -> bool:
    return isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda"


def _in_place(name: str) -> bool:
    """``add_``, ``copy_``, ``__iadd__``... (``__getitem__`` and the other dunders are not)."""
    if name.startswith("__"):
        return name in {f"__i{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and",
                                                 "or", "xor", "lshift", "rshift", "matmul")}
    return name.endswith("_")


def _mark(value: Any, on: bool) -> Any:
    if isinstance(value, torch.Tensor):
        setattr(value, MARK, on)
    return value


class FakeCuda(TorchFunctionMode):
    """While active: ``cuda`` tensors live in CPU memory, marked, and say they are on ``cuda:0``."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _GETTERS and on_fake_cuda(args[0]):
            return _GETTERS[func](args[0])
        if func is torch.Tensor.to or func in _TO_CPU or func in _TO_CUDA:
            return self._move(func, args, kwargs)
        if _is_cuda(kwargs.get("device")):  # a factory: torch.zeros(..., device="cuda"), torch.arange, ...
            kwargs["device"] = "cpu"
            return tree_map(lambda v: _mark(v, True), func(*args, **kwargs))
        result = func(*args, **kwargs)
        if _in_place(getattr(func, "__name__", "")):  # the tensor stays where it was
            return result
        if any(on_fake_cuda(a) for a in tree_flatten((args, kwargs))[0]):
            result = tree_map(lambda v: _mark(v, True), result)
        return result

    @staticmethod
    def _move(func, args, kwargs):
        """``.to(...)``, ``.cpu()``, ``.cuda()``: always in CPU memory; a change of device is a new tensor."""
        source, rest = args[0], list(args[1:])
        if func in _TO_CUDA or func in _TO_CPU:
            to_cuda = func in _TO_CUDA
            result = source
        else:
            if rest and isinstance(rest[0], torch.Tensor):  # .to(other): other's dtype and device
                to_cuda, rest[0] = on_fake_cuda(rest[0]), rest[0].dtype
            else:
                named = [a for a in (*rest, kwargs.get("device")) if isinstance(a, (str, torch.device))]
                to_cuda = _is_cuda(named[0]) if named else on_fake_cuda(source)
            rest = ["cpu" if isinstance(a, (str, torch.device)) else a for a in rest]
            if "device" in kwargs:
                kwargs["device"] = "cpu"
            result = func(source, *rest, **kwargs)
        if result is source:
            if to_cuda == on_fake_cuda(source):
                return source  # already there: torch returns the tensor itself
            result = source.clone()  # a real move makes a new tensor
        return _mark(result, to_cuda)
