"""The benchmark's planning and GPU averaging, without launching anything."""

from __future__ import annotations

import pytest

from ddpstudio.core.bench import BenchConfig, Benchmark
from ddpstudio.core.bench.runner import EPOCHS_FOR_BENCH, GpuUtilisation
from ddpstudio.core.gpu import FakeGpuSource, detect_inventory
from ddpstudio.core.plan import RecipeSpec
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.policy import PolicyError, Request


def fake_gpus(*utilisations: float) -> FakeGpuSource:
    return FakeGpuSource([{"name": "RTX A5000", "total_memory_mb": 24564, "utilization_pct": u}
                          for u in utilisations])


def recipe_config(**kw) -> BenchConfig:
    request = Request(recipe=RecipeSpec(batch_size=16, epochs=3, checkpoint_dir="/nowhere", resume=True))
    return BenchConfig(request=request, **kw)


def test_each_run_is_fixed_to_warmup_plus_steps_with_no_checkpoints():
    bench = Benchmark(recipe_config(steps=7, warmup=3), platform=LINUX, machine=detect_inventory(fake_gpus(0, 0)))
    plan = bench._plan(bench.config.request, 2)
    assert plan.world_size == 2 and plan.backend == "nccl"
    assert (plan.recipe.max_steps, plan.recipe.epochs) == (10, EPOCHS_FOR_BENCH)
    assert plan.recipe.checkpoint_dir is None and not plan.recipe.resume
    assert bench.world_sizes() == [1, 2]


def test_check_refuses_what_cannot_run_before_launching():
    machine = detect_inventory(fake_gpus(0, 0))
    with pytest.raises(PolicyError, match="at most 2"):
        Benchmark(recipe_config(world_sizes=[1, 4]), platform=LINUX, machine=machine).check()
    with pytest.raises(ValueError, match="warm up"):
        Benchmark(recipe_config(warmup=0), platform=LINUX, machine=machine).check()


def test_comparisons_this_machine_cannot_make_become_notes():
    cpu = detect_inventory(FakeGpuSource([]))
    bench = Benchmark(recipe_config(compare=["backend", "store", "batch"]), platform=LINUX, machine=cpu)
    variants, notes = bench.variants()
    assert [v.label for v in variants] == ["gloo, FileStore, per-rank batch", "gloo, TCP store, per-rank batch",
                                           "gloo, FileStore, split batch"]
    assert notes == ["Gloo vs NCCL skipped: NCCL does not exist without CUDA GPUs"]
    gpus = detect_inventory(fake_gpus(0, 0))
    on_windows = recipe_config(compare=["backend"])
    on_windows.request.store_path = "D:\\ddp\\bench.store"  # a Windows path for the Windows plan
    _, notes = Benchmark(on_windows, platform=WINDOWS, machine=gpus).variants()
    assert notes == ["Gloo vs NCCL skipped: NCCL does not exist on Windows"]
    variants, _ = Benchmark(recipe_config(compare=["backend"]), platform=LINUX, machine=gpus).variants()
    assert [v.request.backend for v in variants] == ["auto", "gloo"]


def test_gpu_utilisation_averages_only_the_ranks_gpus_while_measuring():
    source = fake_gpus(80, 60, 5, 5)
    util = GpuUtilisation(2, detect_inventory(source), source)
    util._take(util.sampler.sample_once())  # warm-up: not counted
    source.update(0, utilization_pct=90)
    util.mark()
    util._take(util.sampler.sample_once())
    assert util.finish() == pytest.approx((90 + 60) / 2)


@pytest.mark.slow
def test_a_script_is_stopped_once_its_measured_steps_are_in():
    from pathlib import Path

    from ddpstudio.core.bench import run_benchmark
    from ddpstudio.core.plan import ScriptSpec

    script = Path(__file__).parent / "scripts" / "args_style.py"
    request = Request(script=ScriptSpec(path=str(script), args=["--steps", "100000"]))
    seen = []
    result = run_benchmark(BenchConfig(request=request, world_sizes=[2], steps=4, warmup=2, script_batch_size=4),
                           on_progress=seen.append)
    (row,) = result.rows
    assert row.ok and row.steps == 4 and len(row.step_times) == 4
    assert row.samples_per_s == pytest.approx(8 * 4 / sum(row.step_times))
    assert [p.phase for p in seen][0] == "starting" and seen[-1].phase == "done"
    assert {"warmup", "measuring"} <= {p.phase for p in seen}
    assert result.settings["workload"] == "script" and not result.stopped
    # Kept as a run of its own kind, with its history, comparable like any other (issue 12).
    from ddpstudio.core.metrics.catalog import list_entries
    from ddpstudio.core.metrics.history import read_history

    (entry,) = list_entries()
    assert entry.origin == "bench" and entry.run_dir == row.run_dir and entry.world_size == 2
    assert len(read_history(row.run_dir).track("loss", 0)) >= 4


def test_exchange_comparison_adds_staged_and_staged_fp16_sweeps():
    cpu = detect_inventory(FakeGpuSource([]))
    variants, notes = Benchmark(recipe_config(compare=["exchange"]), platform=LINUX, machine=cpu).variants()
    assert [v.label for v in variants] == ["gloo, FileStore, per-rank batch, native exchange",
                                           "gloo, FileStore, per-rank batch, staged exchange",
                                           "gloo, FileStore, per-rank batch, staged + fp16 exchange"]
    assert [(v.request.grad_exchange, v.request.grad_compression) for v in variants] == [
        ("auto", "none"), ("staged", "none"), ("staged", "fp16")]
    assert notes == []
    _, notes = Benchmark(recipe_config(compare=["exchange"]), platform=LINUX,
                         machine=detect_inventory(fake_gpus(0, 0))).variants()
    assert notes == ["exchange comparison skipped: the staged exchange needs the Gloo backend"]
