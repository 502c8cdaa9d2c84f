"""A run of one rank trains its model without DistributedDataParallel (rank/onerank.py): DDP with a single
process still copies or divides every gradient into its buckets each step, which on a GPU whose small steps
are bound by kernel launches cost 12-18 % of the recipe's samples/s (docs/performance.md). The bare model must
train exactly as DDP did with one rank, look like DDP to the recipe, and the plan must say why."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from ddpstudio.core import protocol
from ddpstudio.core.plan import ONE_RANK_EXCHANGE
from ddpstudio.rank.exchangecount import COUNT_ENV
from ddpstudio.rank.onerank import OneRank
from tests.conftest import processes_of
from tests.studio import TINY, ddpstudio, events, final, of_type, single_rank_child

STEPS = 4


def _model() -> torch.nn.Module:
    torch.manual_seed(0)  # convolutions, BatchNorm (buffers that DDP would broadcast) and a head
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))


def _train(model: torch.nn.Module) -> list[torch.Tensor]:
    """The recipe's optimiser and step, over STEPS seeded batches; the parameters and buffers after them."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        x, y = torch.randn(16, 3, 12, 12, generator=g), torch.randint(0, 10, (16,), generator=g)
        opt.zero_grad(set_to_none=True)
        with model.no_sync():  # what accumulation's micro-batches do; no effect on the result either way
            torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return [t.detach().clone() for t in model.state_dict().values()]


def _compare(store: str, out: str) -> None:
    """In a process of its own: the same training as DDP of one rank (as the recipe wrapped it before) and bare."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    ddp = DDP(_model(), gradient_as_bucket_view=True)
    found = {"keys": (list(ddp.state_dict()), list(OneRank(_model()).state_dict())),
             "ddp": _train(ddp), "bare": _train(OneRank(_model())), "start": list(_model().state_dict().values())}
    dist.destroy_process_group()
    torch.save(found, out)


def test_the_bare_model_trains_bit_identically_to_ddp_of_one_rank(tmp_path):
    found = single_rank_child("tests.test_one_rank", "_compare", tmp_path)
    ddp_keys, bare_keys = found["keys"]
    assert ddp_keys == bare_keys and all(k.startswith("module.") for k in bare_keys)  # checkpoints unchanged
    assert len(found["ddp"]) == len(found["bare"]) == len(found["start"]) == 9  # BatchNorm's buffers too
    assert all(torch.equal(a, b) for a, b in zip(found["ddp"], found["bare"]))
    assert not torch.equal(found["bare"][0], found["start"][0])  # it trained


@pytest.mark.slow
def test_a_one_rank_run_says_there_is_nothing_to_exchange_and_exchanges_nothing(studio_home):
    res = ddpstudio("run", "--json", *TINY, "--world-size", "1", "--max-steps", str(STEPS), "--workers", "0",
                    env={**os.environ, COUNT_ENV: "1"})
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    started = of_type(evs, protocol.RUN_STARTED)[0]
    assert ONE_RANK_EXCHANGE in started.get("reasons")
    assert not any(("gradient exchange:" in r or "staged through" in r) and r != ONE_RANK_EXCHANGE
                   for r in started.get("reasons"))  # the exchange decision it replaces
    steps = of_type(evs, protocol.STEP)
    assert [e.get("step") for e in steps] == list(range(1, STEPS + 1))
    assert {e.get("exchanges") for e in steps} == {0}
    assert final(evs).get("state") == protocol.FINISHED
    plan = json.loads((Path(started.get("run_dir")) / "plan.json").read_text())
    assert plan["world_size"] == 1
    assert not processes_of(studio_home)
