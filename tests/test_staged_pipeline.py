"""The staged exchange (rank/staged.py) in a real 2-rank Gloo group, with DDP's gradients in many buckets.

The hook divides each bucket, copies it down, starts its all-reduce and returns a
future that the copy up completes (on CUDA from Gloo's thread, on a side stream).
The CPU seam (``stage_cpu``) takes the same path with CPU buckets, so it is
checked here with DDP split into several small buckets: every bucket is exchanged
once, in bucket order, from the hook, and the parameters stay bit-identical to
DDP's own all-reduce (float16 buckets: close).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.studio import kill_left, single_rank_child

STEPS = 4


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 96), torch.nn.ReLU(),
                               torch.nn.Linear(96, 96), torch.nn.ReLU(), torch.nn.Linear(96, 10))


def _train(model, rank: int) -> None:
    """STEPS seeded SGD steps on this rank's own batches."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(STEPS):
        x, y = torch.randn(16, 64, generator=gen), torch.randint(0, 10, (16,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def _rank(rank: int, store: str, out: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddpstudio.rank import staged
    from ddpstudio.rank.gloo_exit import settle_at_exit

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    # As the product's ranks do: without it, 6 of 12 such pairs had a rank abort at exit after DDP (SIGABRT,
    # "terminate called without an active exception"; rank/gloo_exit.py says why).
    settle_at_exit()
    order: list[tuple[str, int]] = []
    real_stage, real_all_reduce = staged.stage, dist.all_reduce

    def recorded_stage(state, index, grad, world):
        order.append(("stage", index))
        return real_stage(state, index, grad, world)

    def recorded_all_reduce(tensor, *args, **kwargs):
        index = next((i for i, b in states[-1].buffers.items() if b is tensor), None)
        order.append(("reduce", index))
        return real_all_reduce(tensor, *args, **kwargs)

    staged.stage, staged.dist.all_reduce = recorded_stage, recorded_all_reduce
    results, states = {}, []
    # bucket_cap_mb 0.02: DDP puts each 96x96 layer (36 KB) in a bucket of its own after its first step.
    for name, fp16 in (("native", None), ("staged", False), ("fp16", True)):
        model = DDP(_model(), bucket_cap_mb=0.02)
        if fp16 is not None:
            states.append(staged.StagedState(fp16=fp16, stage_cpu=True))
            model.register_comm_hook(states[-1], staged.staged_hook)
        order.clear()
        _train(model, rank)
        results[name] = {"params": [p.detach().clone() for p in model.parameters()], "order": list(order)}
    dist.destroy_process_group()
    if rank == 0:
        torch.save(results, out)


@pytest.fixture(scope="module")
def exchanged(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline")
    code = "import sys; from tests.test_staged_pipeline import _rank; _rank(int(sys.argv[1]), *sys.argv[2:])"
    ranks = [subprocess.Popen([sys.executable, "-c", code, str(r), str(tmp / "store"), str(tmp / "out.pt")])
             for r in range(2)]
    try:
        assert [p.wait(timeout=120) for p in ranks] == [0, 0]
    finally:
        kill_left(ranks)
    return torch.load(tmp / "out.pt")


def _last_step(order: list[tuple[str, int]]) -> list[tuple[str, int]]:
    starts = [i for i, (what, index) in enumerate(order) if (what, index) == ("stage", 0)]
    return order[starts[-1]:]


def test_each_bucket_is_reduced_once_in_bucket_order_as_it_is_staged(exchanged):
    step = _last_step(exchanged["staged"]["order"])
    buckets = len(step) // 2
    assert buckets >= 3, step  # DDP really split the gradients
    assert step == [(what, index) for index in range(buckets) for what in ("stage", "reduce")]
    assert len(exchanged["staged"]["order"]) == 2 * sum(1 for what, _ in exchanged["staged"]["order"]
                                                        if what == "stage")  # no bucket left behind


def test_staged_parameters_are_bit_identical_to_ddps_own_all_reduce(exchanged):
    native, staged = exchanged["native"]["params"], exchanged["staged"]["params"]
    assert len(native) == len(staged) == 8
    assert all(torch.equal(a, b) for a, b in zip(native, staged))
    assert not torch.equal(native[0], _model()[0].weight.detach())  # it trained


def test_fp16_buckets_stay_close_to_native(exchanged):
    native, fp16 = exchanged["native"]["params"], exchanged["fp16"]["params"]
    worst = max((a - b).abs().max().item() for a, b in zip(native, fp16))
    assert 0 < worst < 1e-3, worst


def _solo(store: str, out: str) -> None:
    """One rank: what staged registers, and the gradients DDP leaves, next to a plain model's."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddpstudio.rank import staged

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    x, y = torch.randn(16, 64, generator=torch.Generator().manual_seed(1)), torch.arange(16) % 10
    plain = _model()
    torch.nn.functional.cross_entropy(plain(x), y).backward()
    found = {}
    for compression in ("none", "fp16"):
        model = DDP(_model())
        state, hook = staged.hook_for("staged", compression)
        assert staged.register(model, "staged", compression) == "staged"
        torch.nn.functional.cross_entropy(model(x), y).backward()
        found[compression] = {"hook": hook.__name__, "state": state,
                              "same": all(torch.equal(a.grad, b.grad)
                                          for a, b in zip(plain.parameters(), model.parameters()))}
    dist.destroy_process_group()
    torch.save(found, out)


def test_one_rank_staged_hands_each_bucket_back_exactly(tmp_path):
    found = single_rank_child("tests.test_staged_pipeline", "_solo", tmp_path)
    for compression in ("none", "fp16"):  # nothing to average: no copy to the CPU, no float16 rounding
        assert found[compression] == {"hook": "solo_hook", "state": None, "same": True}
