"""Precise BatchNorm statistics before evaluation (rank/bnstats.py), over two real Gloo ranks."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from ddpstudio.rank.bnstats import calibration_loader, norm_layers, recompute


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))


def _batches(rank: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(100 + rank)
    # Each rank's data has its own offset, so the average over ranks differs from either rank's.
    return [(torch.randn(6, 3, 8, 8, generator=g) + 3.0 * rank + k, torch.zeros(6, dtype=torch.long))
            for k in range(3)]


def _expected(ranks: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The statistics by hand: the mean over each rank's batches of the batch's per-channel mean and
    unbiased variance after the convolution, then the mean over ranks."""
    conv = _model()[0]
    means, variances = [], []
    with torch.no_grad():
        for rank in range(ranks):
            for images, _ in _batches(rank):
                out = conv(images).transpose(0, 1).reshape(4, -1)
                means.append(out.mean(1))
                variances.append(out.var(1, unbiased=True))
    return torch.stack(means).mean(0), torch.stack(variances).mean(0)


def _rank(rank: int, world: int, store: str, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    model = _model()
    bn = norm_layers(model)[0]
    bn.running_mean.fill_(100.0)  # stale statistics of an older model
    model.eval()
    used = recompute(model, _batches(rank), torch.device("cpu"), "native")
    if rank == 0:
        torch.save({"used": used, "mean": bn.running_mean.clone(), "var": bn.running_var.clone(),
                    "training": model.training, "momentum": bn.momentum}, out)
    dist.destroy_process_group()


@pytest.mark.slow
def test_two_ranks_end_with_the_average_of_their_recomputed_statistics(tmp_path):
    out = tmp_path / "stats.pt"
    code = "import sys; from tests.test_bnstats import _rank; _rank(int(sys.argv[1]), 2, *sys.argv[2:])"
    ranks = [subprocess.Popen([sys.executable, "-c", code, str(r), str(tmp_path / "store"), str(out)])
             for r in range(2)]
    try:
        assert [p.wait(timeout=120) for p in ranks] == [0, 0]
    finally:
        for p in ranks:
            p.kill()
    got = torch.load(out)
    mean, var = _expected(2)
    assert got["used"] == 3
    assert torch.allclose(got["mean"], mean, atol=1e-5), (got["mean"], mean)
    assert torch.allclose(got["var"], var, rtol=1e-4), (got["var"], var)
    one_rank_mean, _ = _expected(1)
    assert not torch.allclose(got["mean"], one_rank_mean, atol=0.5)  # rank 1's batches counted too
    assert got["training"] is False and got["momentum"] == 0.1  # the model comes back as it was


def test_a_model_without_batchnorm_is_left_alone_and_no_batch_is_drawn():
    model = torch.nn.Linear(4, 2)
    drawn = []

    def batches():
        drawn.append(1)
        yield torch.zeros(1, 4), torch.zeros(1)

    assert recompute(model, batches(), torch.device("cpu"), "native") == 0
    assert drawn == []


def test_no_batch_keeps_the_statistics_that_were_there():
    model = _model()
    bn = norm_layers(model)[0]
    bn.running_mean.fill_(2.0)
    assert recompute(model, [], torch.device("cpu"), "native") == 0
    assert torch.equal(bn.running_mean, torch.full((4,), 2.0))


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_each_rank_calibrates_on_its_own_bounded_shard(rank):
    data = [(torch.full((1,), float(i)), 0) for i in range(100)]
    loader = calibration_loader(data, rank, 3, batch_size=4, batches=2)
    seen = [int(x) for images, _ in loader for x in images.flatten()]
    assert seen == list(range(rank, 100, 3))[:8]
    assert loader.num_workers == 0
