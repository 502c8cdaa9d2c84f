"""The recipe's speed defaults (issue 20): DataLoader workers chosen for the machine, synthetic data built
from pools, precision by device, losses read at report points with NaN still stopping every rank."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from ddpstudio.core import protocol
from ddpstudio.core.dataworkers import MAX_WORKERS, choose_workers, usable_cores
from ddpstudio.core.gpu import detect_inventory
from ddpstudio.core.launch.commands import RECIPE_CPU_MALLOC, malloc_env, rank_env
from ddpstudio.core.plan import SYNTHETIC_MAX_SAMPLES, Plan, RecipeSpec, ScriptSpec
from ddpstudio.core.platform import LINUX, WINDOWS, current
from ddpstudio.core.policy import Request, build_plan
from ddpstudio.rank import precision
from ddpstudio.rank.data import NOISE_IMAGES, SyntheticImages, SyntheticIndices, pool_indices
from ddpstudio.rank.reporting import MAX_INTERVAL, TARGET_S, next_interval
from ddpstudio.rank.splits import SYNTHETIC_VAL_SAMPLES, build_splits
from tests.conftest import SHARED_RUN_STEPS, processes_of
from tests.studio import TINY, ddpstudio, events, final, of_type

LINUX_IFACES = {"lo": ["127.0.0.1", "::1"]}


# -- DataLoader workers -----------------------------------------------------------------------------

@pytest.mark.parametrize("cores, ranks, platform, data, workers, words", [
    (16, 1, LINUX, "folder", MAX_WORKERS, "16 cores / 1 rank, one core kept for each rank, at most 8"),
    (16, 2, LINUX, "folder", 7, "16 cores / 2 ranks"),
    (64, 8, LINUX, "cifar10", 7, "64 cores / 8 ranks"),
    (2, 2, LINUX, "folder", 0, "2 cores for 2 ranks leave none spare"),
    (1, 1, LINUX, "folder", 0, "1 core for 1 rank leave none spare"),
    (8, 2, WINDOWS, "folder", 3, "spawn: each imports torch"),
    (16, 1, WINDOWS, "synthetic", 0, "synthetic images are built on each rank's device"),
])
def test_workers_are_chosen_from_the_cores_per_rank(cores, ranks, platform, data, workers, words):
    decision = choose_workers(None, cores, ranks, platform, data)
    assert decision.value == workers
    assert words in decision.reason and "--workers overrides" in decision.reason


def test_workers_given_by_the_user_are_kept_and_said_so():
    decision = choose_workers(5, 2, 2, WINDOWS, "synthetic")
    assert decision.value == 5 and "chosen by you" in decision.reason


def test_the_plan_holds_the_workers_decision_and_its_reason():
    machine = detect_inventory()
    auto = build_plan(Request(world_size=2, recipe=RecipeSpec(data="folder", data_dir="/d")), LINUX, machine,
                      interfaces=LINUX_IFACES)
    expected = choose_workers(None, usable_cores(), 2, LINUX, "folder")
    assert auto.recipe.workers == expected.value and expected.reason in auto.reasons
    mine = build_plan(Request(world_size=2, recipe=RecipeSpec(workers=3)), LINUX, machine, interfaces=LINUX_IFACES)
    assert mine.recipe.workers == 3 and "DataLoader workers: 3 per rank, chosen by you" in mine.reasons


# -- precision --------------------------------------------------------------------------------------

@pytest.mark.parametrize("device, amp, bf16, conv, expected", [
    ("cuda", True, True, True, ("bfloat16", False, True, "bf16")),  # Ampere and later
    ("cuda", True, False, True, ("float16", True, True, "fp16")),  # Volta, Turing
    ("cuda", True, True, False, ("bfloat16", False, False, "bf16")),  # no convolution: layout left alone
    ("cuda", False, True, True, (None, False, True, "fp32")),  # --no-amp
    ("cpu", True, True, True, (None, False, False, "fp32")),
])
def test_precision_follows_the_device(device, amp, bf16, conv, expected):
    chosen = precision.choose(device, amp, bf16, conv)
    assert (chosen.autocast, chosen.grad_scaler, chosen.channels_last, chosen.name) == expected
    assert chosen.reason.startswith(expected[3])


def test_convolutional_models_are_told_apart():
    import torchvision

    assert precision.is_convolutional(torchvision.models.resnet18(num_classes=3))
    assert not precision.is_convolutional(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2)))
    assert precision.for_model(torchvision.models.resnet18(num_classes=3), "cpu", True).name == "fp32"


# -- synthetic data ---------------------------------------------------------------------------------

def test_synthetic_samples_are_deterministic_in_seed_and_index():
    a, b = SyntheticImages(256, 10, 16, seed=4), SyntheticImages(256, 10, 16, seed=4)
    for i in (0, 1, 97, 255):
        assert torch.equal(a[i][0], b[i][0]) and a[i][1] == b[i][1] == i % 10
    assert not torch.equal(a[5][0], SyntheticImages(256, 10, 16, seed=5)[5][0])
    assert not torch.equal(a[5][0], a[6][0])
    # Whole batches built at once (the training loop's way) equal the samples one by one, bit for bit.
    idx = torch.tensor([3, 200, 3, 17])
    assert torch.equal(a.batch(idx), torch.stack([a[i][0] for i in idx.tolist()]))
    with pytest.raises(IndexError):
        a[256]


def test_every_index_gets_its_own_noise_and_the_noise_has_unit_variance():
    assert len({pool_indices(i, 0) for i in range(NOISE_IMAGES)}) == NOISE_IMAGES
    assert torch.equal(torch.stack(pool_indices(torch.arange(50), 3), 1),
                       torch.tensor([pool_indices(i, 3) for i in range(50)]))
    data = SyntheticImages(512, 10, 32)
    noise = torch.stack([data[i][0] - data.prototypes[i % 10] for i in range(512)])
    assert abs(noise.mean().item()) < 0.02 and noise.std().item() == pytest.approx(1.0, abs=0.02)
    with pytest.raises(ValueError, match="at most"):
        SyntheticImages(10, 10, 8, offset=NOISE_IMAGES - 5)


def test_the_largest_synthetic_epoch_the_plan_allows_is_what_the_ranks_can_build():
    # core/validate.py refuses --synthetic-samples above SYNTHETIC_MAX_SAMPLES before any rank starts.
    splits = build_splits(RecipeSpec(synthetic_samples=SYNTHETIC_MAX_SAMPLES, image_size=8))
    assert len(splits.train) == SYNTHETIC_MAX_SAMPLES and len(splits.val) == SYNTHETIC_VAL_SAMPLES
    assert pool_indices(SYNTHETIC_MAX_SAMPLES + SYNTHETIC_VAL_SAMPLES - 1, 0) not in {
        pool_indices(i, 0) for i in range(SYNTHETIC_MAX_SAMPLES)}  # the last held-out image is not trained on
    with pytest.raises(ValueError, match="at most"):
        build_splits(RecipeSpec(synthetic_samples=SYNTHETIC_MAX_SAMPLES + 1, image_size=8))


def _spawned_loaders() -> None:
    """Both synthetic loaders through one spawned worker each, against the same loaders without one."""
    splits = build_splits(RecipeSpec(synthetic_samples=64, image_size=8))
    spawned = DataLoader(splits.val, batch_size=16, num_workers=1, multiprocessing_context="spawn")
    indices = DataLoader(SyntheticIndices(splits.train), batch_size=16, num_workers=1,
                         multiprocessing_context="spawn")
    pairs = list(zip(spawned, DataLoader(splits.val, batch_size=16)))
    assert len(pairs) == SYNTHETIC_VAL_SAMPLES // 16
    for (a, la), (b, lb) in pairs:
        assert torch.equal(a, b) and torch.equal(la, lb)
    first = next(iter(indices))
    assert torch.equal(first[0], torch.arange(16)) and torch.equal(first[1], torch.arange(16) % 10)
    print("same", flush=True)


@pytest.mark.slow
def test_synthetic_data_survives_a_spawned_worker_unchanged():
    """Windows starts DataLoader workers with spawn: the datasets are pickled into fresh interpreters.
    In a child process, whose multiprocessing resource tracker ends with it."""
    code = "from tests.test_recipe_speed import _spawned_loaders; _spawned_loaders()"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert res.returncode == 0 and res.stdout.strip() == "same", res.stdout + res.stderr


# -- report points ----------------------------------------------------------------------------------

def test_report_points_come_about_every_target_seconds():
    assert next_interval(0.0, 0) == 1  # nothing measured yet: report the next step
    assert next_interval(2.0, 1) == 1  # slow steps: every step
    assert next_interval(TARGET_S, 10) == 10
    assert next_interval(0.001, 1) == MAX_INTERVAL  # fast steps: capped, so a NaN is found soon


def _report_rank(rank: int, store: str, events_dir: str) -> None:
    """Two real Gloo ranks report 6 steps; rank 1's loss at step 3 is NaN, rank 0's are all finite."""
    import torch.distributed as dist

    from ddpstudio.rank.emit import Emitter
    from ddpstudio.rank.reporting import Pending, Reporter

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    reporter = Reporter(Emitter(rank, events_dir), rank, 2, "native", batch=4, log_every=1)
    reporter._window = (0.001, 1) if rank == 0 else (10.0, 1)  # rank 0's pace decides the next interval
    losses = [1.0, 0.9, float("nan") if rank == 1 else 0.8, 0.7, 0.6]
    for step, loss in enumerate(losses, 1):
        reporter.add(Pending(step, 0, torch.tensor(loss), 0.1, 1000.0 + step, 0.5, 0.0))
    try:
        reporter.flush({"total_steps": 5}, "HINT")
    except FloatingPointError as exc:
        print(json.dumps({"error": str(exc), "interval": reporter.interval}), flush=True)
    dist.destroy_process_group()


@pytest.mark.slow
def test_a_nan_on_one_rank_stops_both_at_the_same_report_point(tmp_path):
    code = ("import sys; from tests.test_recipe_speed import _report_rank; "
            "_report_rank(int(sys.argv[1]), sys.argv[2], sys.argv[3])")
    ranks = [subprocess.Popen([sys.executable, "-c", code, str(r), str(tmp_path / "store"), str(tmp_path)],
                              stdout=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0]
    said = [json.loads(out.strip().splitlines()[-1]) for out in outs]
    for s in said:
        assert s["error"].startswith("loss became NaN at step 3 (found at step 5, a report point)")
        assert s["error"].endswith("HINT")
    assert said[0]["interval"] == said[1]["interval"] == MAX_INTERVAL  # agreed: rank 0's proposal
    parser = protocol.EventParser()
    per_rank = [[e for line in (tmp_path / f"rank{r}.jsonl").read_text().splitlines() for e in parser.feed(line)]
                for r in range(2)]
    # Every step is still reported with its own time; the global mean only up to the last finite one.
    assert [(e.get("step"), e.t) for e in of_type(per_rank[1], protocol.STEP)] == [(s, 1000.0 + s) for s in range(1, 6)]
    assert [e.get("loss") for e in of_type(per_rank[1], protocol.STEP)][2] is None
    assert [e.get("step") for e in of_type(per_rank[0], protocol.GLOBAL_STEP)] == [1, 2]
    assert of_type(per_rank[0], protocol.GLOBAL_STEP)[1].get("loss") == pytest.approx(0.9)


# -- real runs: two Gloo ranks through the command line -----------------------------------------------

def _image_folder(root: Path) -> Path:
    from PIL import Image

    for split, n in (("train", 12), ("val", 4)):
        for c, cls in enumerate(("cat", "dog")):
            folder = root / split / cls
            folder.mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (16, 16), (i * 20, c * 200, 0)).save(folder / f"{i}.png")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("extra, expected", [
    ((), None),  # chosen for this machine
    (("--workers", "1"), 1),  # the user's: each rank really reads through a persistent worker process
])
def test_a_folder_run_states_its_workers_and_trains_with_them(studio_home, tmp_path, extra, expected):
    # The perceptron: the workers are the point, not the model. resnet18 at 16 px is not in the warm cache, so
    # the command line imported torch and torchvision to probe it, and each rank trained it (27 s of CPU a run).
    # One rank: the workers are each rank's own (choose_workers divides the cores by the ranks), and a second
    # rank cost about 6 s of CPU before its first step.
    data = _image_folder(tmp_path / "images")
    res = ddpstudio("run", "--json", "--model", "mlp", "--world-size", "1", "--data", str(data), "--max-steps", "3",
                    "--eval-every", "2", "--batch-size", "4", "--image-size", "16", "--rendezvous-timeout", "60",
                    *extra)
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    started = of_type(evs, protocol.RUN_STARTED)[0]
    decision = choose_workers(expected, usable_cores(), 1, current(), "folder")
    assert decision.reason in started.get("reasons")
    plan = json.loads((Path(started.get("run_dir")) / "plan.json").read_text())
    assert plan["recipe"]["workers"] == decision.value
    assert final(evs).get("state") == protocol.FINISHED
    assert [e.get("step") for e in of_type(evs, protocol.EVAL)] == [2, 3]  # 24 images: 6 steps of 1 x 4
    assert [e.get("step") for e in of_type(evs, protocol.GLOBAL_STEP)] == [1, 2, 3]
    assert not processes_of(studio_home)


@pytest.mark.slow
def test_synthetic_samples_set_the_length_of_an_epoch(studio_home):
    # gpu.py times a steady stretch inside one epoch (an epoch's end evaluates): more images make it longer.
    res = ddpstudio("run", "--json", "--model", "mlp", "--world-size", "1", "--synthetic-samples", "24",
                    "--batch-size", "4", "--epochs", "2", "--image-size", "8", "--rendezvous-timeout", "60")
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    plan = json.loads((Path(of_type(evs, protocol.RUN_STARTED)[0].get("run_dir")) / "plan.json").read_text())
    assert plan["recipe"]["synthetic_samples"] == 24
    ends = of_type(evs, protocol.EPOCH_END)
    assert [(e.get("epoch"), e.get("complete")) for e in ends] == [(0, True), (1, True)]
    steps = [e.get("step") for e in of_type(evs, protocol.GLOBAL_STEP)]
    assert steps == list(range(1, 13))  # 24 images: 6 steps of 1 rank x 4 per epoch
    own = of_type(evs, protocol.STEP)  # the rank's, stamped by the clock that stamped its epoch ends
    assert [max(e.get("step") for e in own if e.t <= end.t) for end in ends] == [6, 12]
    assert final(evs).get("state") == protocol.FINISHED
    assert not processes_of(studio_home)


@pytest.mark.slow
def test_the_demo_defaults_are_said_with_their_reasons(shared_run):
    # A reader of the two-rank perceptron run that test_run_e2e also reads (conftest.py's shared_run): the
    # defaults it states (workers, precision) are those of any synthetic-data run on this machine.
    res = shared_run.result
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    reasons = of_type(evs, protocol.RUN_STARTED)[0].get("reasons")
    assert choose_workers(None, usable_cores(), 2, current(), "synthetic").reason in reasons
    logs = [e.get("line") for e in of_type(evs, protocol.LOG) if e.get("stream") == "recipe"]
    assert "precision: fp32 on the CPU" in logs
    steps = of_type(evs, protocol.STEP)
    assert sorted((e.rank, e.get("step")) for e in steps) == [(r, s) for r in (0, 1)
                                                              for s in range(1, SHARED_RUN_STEPS + 1)]
    assert all(isinstance(e.get("loss"), float) and e.get("samples_per_s") for e in steps)


@pytest.mark.slow
def test_a_diverging_run_names_the_first_step_whose_loss_was_not_finite(studio_home):
    res = ddpstudio("run", "--json", "--lr", "1e12", "--max-steps", "40", *TINY)
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr
    evs = events(res.stdout)
    errors = of_type(evs, protocol.ERROR)
    named = {int(re.search(r"loss became (?:NaN|infinite) at step (\d+)", e.get("message")).group(1))
             for e in errors if "loss became" in e.get("message", "")}
    first_bad = min(e.get("step") for e in of_type(evs, protocol.STEP) if e.get("loss") is None)
    assert named == {first_bad}, [e.get("message") for e in errors]
    assert {e.rank for e in errors if "loss became" in e.get("message", "")} == {0, 1}  # both ranks stopped
    assert final(evs).get("state") == protocol.FAILED
    assert all(e.get("loss") is None or math.isfinite(e.get("loss")) for e in of_type(evs, protocol.STEP))
    assert not processes_of(studio_home)


# -- glibc's malloc for the recipe's CPU ranks ------------------------------------------------------------

def test_the_recipes_cpu_ranks_get_both_malloc_thresholds_and_the_users_own_setting_wins():
    cpu = Plan(run_id="r", run_dir="/runs/r", world_size=2, backend="gloo", device="cpu", store="file",
               init_method="file:///tmp/pg", recipe=RecipeSpec())
    assert malloc_env(cpu, {}, LINUX) == RECIPE_CPU_MALLOC == {"MALLOC_MMAP_THRESHOLD_": "33554432",
                                                               "MALLOC_TRIM_THRESHOLD_": "67108864"}
    # One set by the user: neither is added (one alone made the step slower than both or none).
    assert malloc_env(cpu, {"MALLOC_TRIM_THRESHOLD_": "0"}, LINUX) == {}
    # Windows has no glibc; a GPU rank's large buffers are the CUDA allocator's; a user's script is left as written.
    assert malloc_env(cpu, {}, WINDOWS) == {}
    assert malloc_env(replace(cpu, device="cuda", backend="nccl"), {}, LINUX) == {}
    assert malloc_env(replace(cpu, recipe=None, script=ScriptSpec(path="/t.py")), {}, LINUX) == {}
    if not current().is_windows:  # what the launcher gives a rank here
        env = rank_env(cpu, 1, "/events", base={"MALLOC_MMAP_THRESHOLD_": "65536"})
        assert env["MALLOC_MMAP_THRESHOLD_"] == "65536" and "MALLOC_TRIM_THRESHOLD_" not in env
        assert {k: rank_env(cpu, 1, "/events", base={})[k] for k in RECIPE_CPU_MALLOC} == RECIPE_CPU_MALLOC
