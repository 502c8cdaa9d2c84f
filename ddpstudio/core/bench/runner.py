"""Runs the training at each world size through the ordinary launcher and times it.

Each run is a normal DDP Studio run (policy.build_plan, then a Session), with
the step count fixed to warm-up + measured steps. Call :func:`run_benchmark`
from a worker thread (the window) or the main thread (the CLI); ``stop()`` on a
:class:`Benchmark` ends the current run and skips the rest.
"""

from __future__ import annotations

import os
import platform as _platform
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable

from ddpstudio.core import protocol
from ddpstudio.core.bench import analysis, timing
from ddpstudio.core.bench.model import (COMPARISONS, FAILED, OK, STOPPED, BenchConfig, BenchProgress,
                                        BenchResult, BenchRow)
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import Platform, current
from ddpstudio.core.policy import PolicyError, Request, build_plan
from ddpstudio.core.process.exitcodes import describe_exit

ProgressCallback = Callable[[BenchProgress], None]
EPOCHS_FOR_BENCH = 1_000_000  # max_steps ends the run; epochs only must not end it first


@dataclass(frozen=True)
class Variant:
    """One sweep over the world sizes: the user's request, or it with one choice flipped."""

    request: Request
    label: str


EXCHANGES = (("native", "none"), ("staged", "none"), ("staged", "fp16"))  # what "exchange" compares


def describe(request: Request, backend: str, store: str, exchange: tuple[str, str] | None = None) -> str:
    label = f"{backend}, {'FileStore' if store == 'file' else 'TCP store'}, {request.batch_mode} batch"
    if exchange is not None:
        label += f", {exchange[0]}{' + fp16' if exchange[1] == 'fp16' else ''} exchange"
    return label


class Benchmark:
    """One benchmark: ``run()`` blocks until every world size has run; ``stop()`` from any thread."""

    def __init__(self, config: BenchConfig, on_progress: ProgressCallback | None = None,
                 platform: Platform | None = None, machine=None) -> None:
        self.config, self.on_progress = config, on_progress
        self.platform = platform or current()
        self._machine = machine
        self._stop = threading.Event()
        self._session = None
        self._lock = threading.Lock()

    # -- public ------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            if self._session is not None:
                self._session.stop()

    @property
    def machine(self):
        if self._machine is None:
            from ddpstudio.core.gpu import detect_inventory

            self._machine = detect_inventory()
        return self._machine

    def world_sizes(self) -> list[int]:
        if self.config.world_sizes:
            return sorted(set(self.config.world_sizes))
        return analysis.default_world_sizes(self.machine.gpu_count,
                                            not (self.machine.cuda_available and self.machine.gpu_count))

    def variants(self) -> tuple[list[Variant], list[str]]:
        """The user's request first, then one per comparison that this machine can make; plus notes."""
        base = self.config.request
        probe = self._plan(base, 1)
        labelled = "exchange" in self.config.compare  # labels name the exchange only when it is compared

        def label(request: Request, plan: Plan) -> str:
            return describe(request, plan.backend, plan.store,
                            (plan.grad_exchange, plan.grad_compression) if labelled else None)

        out = [Variant(base, label(base, probe))]
        notes: list[str] = []
        for what in self.config.compare:
            others, why_not = self._flipped_all(base, what, probe)
            if not others:
                notes.append(why_not)
            for other in others:
                try:
                    flipped = self._plan(other, 1)
                except PolicyError as exc:
                    notes.append(f"{what} comparison skipped: {exc}")
                    continue
                out.append(Variant(other, label(other, flipped)))
        return out, notes

    def _flipped_all(self, base: Request, what: str, probe: Plan) -> tuple[list[Request], str]:
        """The requests ``what`` adds (the exchange comparison adds two); none, with why, if it cannot run."""
        if what != "exchange":
            other, why_not = self._flipped(base, what, probe)
            return ([other] if other is not None else []), why_not
        if probe.backend != "gloo":
            return [], "exchange comparison skipped: the staged exchange needs the Gloo backend"
        own = (probe.grad_exchange, probe.grad_compression)
        return [replace(base, grad_exchange=mode, grad_compression=compression)
                for mode, compression in EXCHANGES if (mode, compression) != own], ""

    def check(self) -> None:
        """Raise PolicyError/ValueError now for anything that cannot run, before launching."""
        c = self.config
        if c.request.gpus is not None:
            raise ValueError("the benchmark runs 1, 2, 4 ... ranks on the first GPUs and takes no GPU choice: tick "
                             "every GPU (or hide one by starting DDP Studio with CUDA_VISIBLE_DEVICES set)")
        if c.steps < 1:
            raise ValueError(f"measure at least 1 step (got {c.steps})")
        if c.warmup < 1:
            raise ValueError(f"warm up for at least 1 step (got {c.warmup}): the first step is never typical")
        unknown = [w for w in c.compare if w not in COMPARISONS]
        if unknown:
            raise ValueError(f"unknown comparison {unknown[0]!r}: choose {', '.join(COMPARISONS)}")
        variants, _ = self.variants()
        for variant in variants:
            for ws in self.world_sizes():
                self._plan(variant.request, ws)

    def run(self) -> BenchResult:
        self.check()
        variants, notes = self.variants()
        sizes = self.world_sizes()
        rows: list[BenchRow] = []
        runs = len(variants) * len(sizes)
        for v_index, variant in enumerate(variants):
            for w_index, ws in enumerate(sizes):
                if self._stop.is_set():
                    break
                rows.append(self._run_one(variant, ws, v_index * len(sizes) + w_index, runs))
        analysis.fill_derived(rows, self.config.samples_per_epoch)
        recipe = self.config.request.recipe
        device = self._plan(self.config.request, 1).device
        verdict = analysis.verdict(rows, device=device, workers=recipe.workers if recipe else None,
                                   cpu_cores=os.cpu_count(), threads_per_rank=recipe.threads if recipe else 1)
        return BenchResult(rows=rows, verdict=verdict, machine=self._machine_facts(device),
                           settings=self._settings(device), notes=notes, stopped=self._stop.is_set())

    # -- plans ---------------------------------------------------------------------
    def _plan(self, request: Request, world_size: int) -> Plan:
        req = replace(request, world_size=world_size, run_id=None)
        if req.recipe is not None:
            req.recipe = replace(req.recipe, max_steps=self.config.warmup + self.config.steps,
                                 epochs=EPOCHS_FOR_BENCH, checkpoint_dir=None, resume=False)
        return build_plan(req, self.platform, self.machine)

    def _flipped(self, base: Request, what: str, probe: Plan) -> tuple[Request | None, str]:
        if what == "backend":
            other = "gloo" if probe.backend == "nccl" else "nccl"
            if other == "nccl" and (self.platform.is_windows or probe.device != "cuda"):
                where = "on Windows" if self.platform.is_windows else "without CUDA GPUs"
                return None, f"Gloo vs NCCL skipped: NCCL does not exist {where}"
            return replace(base, backend=other), ""
        if what == "store":
            if base.script is not None and base.script.style == "env":
                return None, "FileStore vs TCP skipped: a torchrun-style script needs the TCP store"
            return replace(base, store="tcp" if probe.store == "file" else "file", store_path=None), ""
        if base.recipe is None:
            return None, "batch comparison skipped: DDP Studio sets the batch only for the built-in recipe"
        return replace(base, batch_mode="split" if base.batch_mode == "per-rank" else "per-rank"), ""

    # -- one run ---------------------------------------------------------------------
    def _progress(self, variant: Variant, ws: int, index: int, runs: int, phase: str, step: int = 0,
                  message: str = "") -> None:
        if self.on_progress is not None:
            total = self.config.warmup + self.config.steps
            self.on_progress(BenchProgress(variant.label, ws, index, runs, phase, step, total, message))

    def _run_one(self, variant: Variant, ws: int, index: int, runs: int) -> BenchRow:
        from ddpstudio.core.launch.session import Session

        c = self.config
        plan = self._plan(variant.request, ws)
        plan.origin = "bench"  # listed as a benchmark run, comparable like any other (issue 12)
        per_rank = plan.recipe.batch_size if plan.recipe else c.script_batch_size
        row = BenchRow(variant=variant.label, world_size=ws, backend=plan.backend, store=plan.store,
                       batch_mode=variant.request.batch_mode, per_rank_batch=per_rank,
                       effective_batch=per_rank * ws if per_rank else None, warmup=c.warmup, steps=0,
                       run_dir=plan.run_dir)
        session = Session(plan, self.platform)
        sampler = GpuUtilisation(ws, self.machine) if plan.device == "cuda" else None
        rank0: list[protocol.Event] = []
        error: str | None = None
        self._progress(variant, ws, index, runs, "starting", message=f"starting {ws} rank(s)")
        t0 = time.time()
        with self._lock:
            self._session = session
            session.start()
        if self._stop.is_set():
            session.stop()
        if sampler:
            sampler.start()
        try:
            for ev in session.events():
                if ev.type == protocol.STEP and ev.rank == 0:
                    rank0.append(ev)
                    n = len(rank0)
                    self._progress(variant, ws, index, runs, "warmup" if n <= c.warmup else "measuring", n)
                    if sampler and n == c.warmup:
                        sampler.mark()
                    if plan.script is not None and n >= c.warmup + c.steps:
                        session.stop()  # a script runs its own length: stop it once measured
                elif ev.type == protocol.GLOBAL_STEP and ev.get("steps_per_epoch"):
                    row.steps_per_epoch = int(ev.get("steps_per_epoch"))
                elif ev.type == protocol.ERROR and error is None:
                    error = ev.get("message")
        finally:
            with self._lock:
                self._session = None
            util = sampler.finish() if sampler else None
            _end(session)
        # a fast script may report a few more steps before the stop reaches it: they are not measured
        stamps = timing.rank0_step_stamps(rank0)[: c.warmup + c.steps]
        if stamps:
            row.time_to_first_step_s = stamps[0][1] - t0
        row.step_times = timing.measured_step_times(stamps, c.warmup) if len(stamps) > c.warmup else []
        row.steps = len(row.step_times)
        summary = timing.StepSummary.of(row.step_times)
        row.step_time_s, row.step_time_median_s, row.steps_per_s = summary.mean_s, summary.median_s, summary.steps_per_s
        row.samples_per_s = timing.throughput(row.step_times, row.effective_batch) if row.effective_batch else None
        row.data_wait_fraction = timing.mean_data_wait(rank0, c.warmup)
        row.gpu_util_pct = util
        row.state, row.error = self._state(session, row, error)
        self._progress(variant, ws, index, runs, "done" if row.ok else "failed", len(stamps),
                       row.error or "")
        return row

    def _state(self, session, row: BenchRow, error: str | None) -> tuple[str, str | None]:
        final = session.state
        if row.steps >= self.config.steps and final in (protocol.FINISHED, protocol.STOPPED):
            return OK, None
        if final == protocol.STOPPED or self._stop.is_set():
            return STOPPED, "stopped before the measured steps were done"
        summary = session.final.get("summary") if session.final else None
        if final == protocol.FINISHED:
            return FAILED, (f"the run ended after {row.steps} measured steps of {self.config.steps}; "
                            "lower --steps or --warmup, or add data")
        ended = f"the run ended without a result ({describe_exit(session.returncode, self.platform)})"
        last_words = session.last_words
        return FAILED, summary or error or (f"{ended}: {last_words}" if last_words else ended)

    # -- descriptions ------------------------------------------------------------------
    def _machine_facts(self, device: str) -> dict:
        m = self.machine
        gpus = [g.name for g in getattr(m, "gpus", ())]
        return {"os": f"{_platform.system()} {_platform.release()}", "platform": self.platform.name,
                "cpu": _platform.processor() or _platform.machine(), "cpu_cores": os.cpu_count(),
                "gpus": gpus, "device": device, "torch": getattr(m, "torch_version", None),
                "python": _platform.python_version()}

    def _settings(self, device: str) -> dict:
        c, req = self.config, self.config.request
        out = {"steps": c.steps, "warmup": c.warmup, "world_sizes": self.world_sizes(), "compare": list(c.compare),
               "batch_mode": req.batch_mode, "device": device}
        if req.recipe is not None:
            r = req.recipe
            out.update(workload="recipe", model=r.model, data=r.data, batch_size=r.batch_size,
                       image_size=r.image_size, workers=r.workers, amp=r.amp)
        elif req.script is not None:
            out.update(workload="script", script=req.script.path, batch_size=c.script_batch_size)
        return out


def _end(session, timeout: float = 30.0) -> None:
    """Make sure the launcher is gone (an exception in a callback must not orphan a run)."""
    proc = session.proc
    if proc is None or proc.poll() is not None:
        return
    session.stop()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:  # the launcher did not stop its ranks in time: last resort
        proc.kill()
        proc.wait()


class GpuUtilisation:
    """Mean utilisation of the first ``world_size`` GPUs between ``mark()`` and ``finish()``."""

    def __init__(self, world_size: int, inventory, source=None) -> None:
        from ddpstudio.core.gpu import Sampler

        self.world_size, self.inventory = world_size, inventory
        self.values: list[float] = []
        self.counting = False
        self.sampler = Sampler(source, interval_s=0.5, on_snapshot=self._take)

    def start(self) -> None:
        self.sampler.start()

    def mark(self) -> None:
        self.counting = True

    def _take(self, snapshot) -> None:
        if self.counting:
            for sample in snapshot.gpus:
                gpu = self.inventory.gpu_for(sample)  # NVML's numbering is not torch's
                if gpu is not None and gpu.index < self.world_size and sample.utilization_pct is not None:
                    self.values.append(sample.utilization_pct)

    def finish(self) -> float | None:
        self.sampler.stop()
        return sum(self.values) / len(self.values) if self.values else None


def run_benchmark(config: BenchConfig, on_progress: ProgressCallback | None = None,
                  stop_event: threading.Event | None = None) -> BenchResult:
    """Run the benchmark and return its result; set ``stop_event`` (from any thread) to end it early."""
    bench = Benchmark(config, on_progress)
    if stop_event is None:
        return bench.run()
    watcher_done = threading.Event()

    def watch() -> None:
        while not watcher_done.is_set():
            if stop_event.wait(0.2):
                bench.stop()
                return

    thread = threading.Thread(target=watch, name="ddpstudio-bench-stop", daemon=True)
    thread.start()
    try:
        return bench.run()
    finally:
        watcher_done.set()
        thread.join(1.0)
