"""DDP's one all-reduce that no hook reaches: the reducer's map of used parameters (pytorch #186535).

With ``find_unused_parameters=True`` or ``static_graph=True`` DDP's C++ reducer
all-reduces, besides the buckets, a map of which parameters took part in the
step, and it keeps that map on the parameters' device (torch's
``csrc/distributed/c10d/reducer.cpp``: ``initialize_local_used_map`` puts
``local_used_map_dev_`` on ``replicas_[0][0].device()``, and
``all_reduce_local_used_map`` ends in
``local_used_work_ = process_group_->allreduce(...)``, run when
``dynamic_graph_find_unused() || static_graph_first_iteration()``). Nothing in
Python sees that call, so the staged exchange cannot move it to the CPU: on a
Windows build a Gloo group on CUDA parameters dies there (0xC0000005) at the
first backward. The rank helper reads the two settings from the DDP object
(torch 2.14.1 ``nn/parallel/distributed.py``: ``self.find_unused_parameters =
find_unused_parameters`` in ``__init__``; ``self.static_graph = True`` in
``_set_static_graph``, which ``__init__`` calls for ``static_graph=True``) and
says so before training. The built-in recipe sets neither.
"""

from __future__ import annotations

import json
import os
from typing import Any

FLAGS = ("find_unused_parameters", "static_graph")


def unreachable_all_reduce(model: Any, exchange: str) -> str | None:
    """Why ``model`` (a DDP on a Gloo group) will all-reduce on the GPU whatever the exchange does; None when
    it will not: only the ``staged`` exchange is there to avoid Gloo's CUDA all-reduce, and only CUDA
    parameters (or CPU ones under the seam that stages them as if they were, ``STAGE_CPU_ENV``) meet it."""
    from ddpstudio.rank.staged import STAGE_CPU_ENV, STAGED

    flags = [name for name in FLAGS if getattr(model, name, False) is True]
    if exchange != STAGED or not flags:
        return None
    on_gpu = any(p.is_cuda for p in model.module.parameters())
    if not (on_gpu or os.environ.get(STAGE_CPU_ENV) == "1"):
        return None
    settings = " and ".join(f"{name}=True" for name in flags)
    return (f"DDP was built with {settings}: its reducer then all-reduces a map of the parameters each step "
            "used, on the GPU, from C++ where the staged exchange cannot reach it; where Gloo cannot "
            "all-reduce CUDA tensors (Windows builds, pytorch #186535) this rank dies (0xC0000005) at its "
            f"first backward. {_probe_says()} Fixes: set find_unused_parameters=False and static_graph=False "
            "(every parameter must then get a gradient each step); or, on Linux, the nccl backend; or, if "
            "the check finds that Gloo all-reduces CUDA tensors correctly here, the native exchange.")


def _probe_says() -> str:
    """The last check of Gloo's CUDA all-reduce on this machine, as the launcher's ``auto`` read it."""
    try:
        from ddpstudio.core.exchange.probe import ProbeResult, cache_path

        result = ProbeResult.from_dict(json.loads(cache_path().read_text(encoding="utf-8")))
    except Exception:  # noqa: BLE001 - never checked, or unreadable: the fixes still stand
        return "This machine's Gloo CUDA all-reduce has not been checked yet ('ddpstudio doctor' checks it)."
    return f"This machine's last check of it says: {result.outcome} ({result.sentence()})."
