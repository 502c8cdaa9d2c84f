"""Loaded by ``benchmarks/recipe_parts.py`` in the recipe's rank (this folder first on PYTHONPATH); not product code.

In a rank of a run (``RANK`` and ``DDPSTUDIO_EVENTS_DIR`` set) with ``PARTS_OUT`` set, it times the
training steps ``PARTS_W`` to ``PARTS_W + PARTS_N`` with the device synchronised at both ends, writes
the figures to ``PARTS_OUT/r<pid>.json``, gives the run ``PARTS_SAMPLES`` synthetic samples (so the
window stays inside one epoch: no evaluation in it), and switches off the parts named in
``PARTS_OFF`` (comma separated):

* ``noflush``: no report point before the run's last step (rank/reporting.py ``Reporter.due``);
* ``fixedbatch``: the first synthetic batch reused instead of one built per step (rank/data.py);
* ``noddp``: the bare model instead of DistributedDataParallel (one rank: nothing to exchange).

Every other process (the CLI, the launcher) is left alone.
"""

import os

if os.environ.get("RANK") is not None and os.environ.get("DDPSTUDIO_EVENTS_DIR") and os.environ.get("PARTS_OUT"):
    import contextlib
    import dataclasses
    import json
    import time

    import torch
    import torch.nn.parallel

    from ddpstudio.rank import data, reporting, splits

    OFF = set(filter(None, os.environ.get("PARTS_OFF", "").split(",")))
    W, N = int(os.environ["PARTS_W"]), int(os.environ["PARTS_N"])
    SAMPLES = int(os.environ["PARTS_SAMPLES"])
    _build_splits, _add, _flush, _batch = (splits.build_splits, reporting.Reporter.add, reporting.Reporter.flush,
                                           data.SyntheticImages.batch)
    _seen = {"steps": 0, "flushes": 0}

    def _sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def _add_timed(self, pending):
        _add(self, pending)
        _seen["steps"] += 1
        if _seen["steps"] not in (W, W + N):
            return
        _sync()
        _seen[_seen["steps"]] = (time.perf_counter(), time.process_time(), _seen["flushes"])
        if _seen["steps"] == W + N:
            (t0, c0, f0), (t1, c1, f1) = _seen[W], _seen[W + N]
            result = dict(off=sorted(OFF), steps=N, wall_ms=1e3 * (t1 - t0) / N, cpu_ms=1e3 * (c1 - c0) / N,
                          flushes=f1 - f0)
            with open(os.path.join(os.environ["PARTS_OUT"], f"r{os.getpid()}.json"), "w") as fh:
                json.dump(result, fh)

    def _flush_counted(self, *args, **kwargs):
        _seen["flushes"] += 1
        return _flush(self, *args, **kwargs)

    splits.build_splits = lambda spec: _build_splits(dataclasses.replace(spec, synthetic_samples=SAMPLES))
    reporting.Reporter.add, reporting.Reporter.flush = _add_timed, _flush_counted
    if "noflush" in OFF:
        reporting.Reporter.due = property(lambda self: False)
    if "fixedbatch" in OFF:
        _first = {}

        def _batch_once(self, indices):
            key = (indices.device, len(indices))
            if key not in _first:
                _first[key] = _batch(self, indices)
            return _first[key]

        data.SyntheticImages.batch = _batch_once
    if "noddp" in OFF:
        class BareModel(torch.nn.Module):
            """What the recipe uses of DDP, without DDP: ``module``, ``no_sync()``, ``register_comm_hook``."""

            def __init__(self, module, device_ids=None, gradient_as_bucket_view=False, forward_sync_buffers=False,
                         broadcast_buffers=True):
                super().__init__()
                self.module = module

            def forward(self, *args, **kwargs):
                return self.module(*args, **kwargs)

            def no_sync(self):
                return contextlib.nullcontext()

            def register_comm_hook(self, *args):
                pass

        torch.nn.parallel.DistributedDataParallel = BareModel
