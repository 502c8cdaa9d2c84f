"""Every all-reduce a rank makes goes through one staged-aware door (pytorch #186535, issue 19 item 1).

On Windows builds Gloo has no CUDA all-reduce: a CUDA tensor handed to it kills the rank with
0xC0000005. DDP's buckets go through the staged hook; everything else a rank all-reduces (the
recipe's loss mean, the evaluation's totals, a script's calls through the rank helper) goes through
:func:`ddpstudio.rank.staged.all_reduce`. Checked two ways: by reading the code (no other all-reduce
under ddpstudio/rank), and by running the real evaluation and loss mean in a real two-rank Gloo group
with the GPU faked at the hardware edge (tests/fakecuda.py says why that fake and no other).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import ddpstudio.rank
from tests.studio import kill_left

RANK_DIR = Path(ddpstudio.rank.__file__).parent
# The door itself and the DDP hook's own exchange (which stages its buckets itself).
ALLOWED = {("staged.py", "all_reduce"), ("staged.py", "staged_all_reduce"), ("staged.py", "staged_hook"),
           ("staged.py", "_launch")}
DIST_MODULES = {"torch.distributed", "torch.distributed.distributed_c10d"}


def _all_reduces(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of each use of torch.distributed's all_reduce* in ``source``."""
    tree = ast.parse(source)
    aliases = {"dist", "c10d"}  # the usual names, also when the module comes in as a parameter
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.name in DIST_MODULES and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "torch":
            aliases |= {a.asname or a.name for a in node.names if a.name == "distributed"}
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.distributed":
            aliases |= {a.asname or a.name for a in node.names if a.name == "distributed_c10d"}
    found = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            if isinstance(child, ast.Attribute) and child.attr.startswith("all_reduce"):
                owner = ast.unparse(child.value)
                if owner.split(".")[-1] in aliases or owner in DIST_MODULES:
                    found.append((child.lineno, inner))
            elif isinstance(child, ast.ImportFrom) and child.module in DIST_MODULES:
                found.extend((child.lineno, inner) for a in child.names if a.name.startswith("all_reduce"))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_the_checker_finds_each_way_of_reaching_torchs_all_reduce():
    source = ("import torch\nimport torch.distributed as D\nfrom torch import distributed\n"
              "from torch.distributed import all_reduce\n"
              "def f(t, dist):\n    D.all_reduce(t)\n    distributed.all_reduce(t)\n"
              "    torch.distributed.all_reduce_coalesced([t])\n    self.dist.all_reduce(t)\n"
              "    return dist.all_reduce\n")
    assert _all_reduces(source) == [(4, "<module>"), (6, "f"), (7, "f"), (8, "f"), (9, "f"), (10, "f")]


def test_no_all_reduce_under_ddpstudio_rank_bypasses_the_staged_door():
    stray = [f"{path.relative_to(RANK_DIR)}:{line} in {where}"
             for path in sorted(RANK_DIR.rglob("*.py"))
             for line, where in _all_reduces(path.read_text(encoding="utf-8"))
             if (path.name, where) not in ALLOWED]
    assert not stray, f"all-reduce outside ddpstudio.rank.staged.all_reduce: {stray}"


def _collect_rank(rank: int, store: str, out: str, exchange: str) -> None:
    """One rank: the real evaluation and loss mean on a (fake) CUDA device, the real all-reduce recorded."""
    import torch.distributed as dist

    from ddpstudio.rank.emit import Emitter
    from ddpstudio.rank.evaluate import evaluate, make_loader
    from ddpstudio.rank.reporting import Pending, Reporter
    from tests.fakecuda import FakeCuda

    dist.init_process_group("gloo", init_method=Path(store).as_uri(), rank=rank, world_size=2)
    real, seen = dist.all_reduce, []

    def recording(tensor, *args, **kwargs):
        seen.append(str(tensor.device))  # read through FakeCuda: 'cuda:0' for what lives on the "GPU"
        return real(tensor, *args, **kwargs)

    dist.all_reduce = recording
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 7)
    g = torch.Generator().manual_seed(1)
    data = list(zip(torch.randn(13, 4, generator=g), torch.randint(0, 7, (13,), generator=g).tolist()))
    cuda = torch.device("cuda", 0)
    with FakeCuda():
        result = evaluate(model, make_loader(data, rank, 2, batch_size=3), cuda, 7, rank, 2, exchange)
        # The recipe's loss mean: the step's loss stays on the device until the report point reads it.
        reporter = Reporter(Emitter(rank, events_dir=""), rank, 2, exchange, batch=3, log_every=1)
        reporter.add(Pending(1, 0, torch.tensor(float(rank + 1), device=cuda), 0.1, 0.0, 1.0, 0.0))
        [reported] = reporter.flush({}, "")
        mean = reported.mean_loss
    if rank == 0:
        Path(out).write_text(json.dumps({"devices": seen, "samples": result.samples, "mean": mean}))
    dist.destroy_process_group()


def _run_both_ranks(tmp_path: Path, exchange: str) -> dict:
    out = tmp_path / f"{exchange}.json"
    code = ("import sys; from tests.test_rank_collectives import _collect_rank; "
            "_collect_rank(int(sys.argv[1]), *sys.argv[2:])")
    ranks = [subprocess.Popen([sys.executable, "-c", code, str(r), str(tmp_path / f"store-{exchange}"), str(out),
                               exchange], stderr=subprocess.PIPE, text=True) for r in range(2)]
    try:
        errors = [p.communicate(timeout=120)[1] for p in ranks]
    finally:
        kill_left(ranks)
    assert [p.returncode for p in ranks] == [0, 0], errors
    return json.loads(out.read_text())


@pytest.mark.slow
def test_staged_exchange_never_hands_gloo_a_cuda_tensor_in_evaluation_or_the_loss_mean(tmp_path):
    staged = _run_both_ranks(tmp_path, "staged")
    assert staged["devices"] == ["cpu", "cpu"], staged  # the evaluation's totals, then the loss mean
    assert staged["samples"] == 13 and staged["mean"] == 1.5  # summed over both ranks, copied back
    # The fake is what makes the check mean something: unstaged, the same code hands Gloo the GPU's tensors.
    native = _run_both_ranks(tmp_path, "native")
    assert native["devices"] == ["cuda:0", "cuda:0"], native
    assert native["samples"] == 13 and native["mean"] == 1.5


def test_the_recipe_never_asks_ddp_for_the_used_map_all_reduce_no_hook_reaches():
    """find_unused_parameters / static_graph make DDP's reducer all-reduce on the GPU from C++ (rank/usedmap.py):
    the recipe builds its DDP with neither, and with no ``**kwargs`` that could carry them."""
    tree = ast.parse((RANK_DIR / "recipe.py").read_text(encoding="utf-8"))
    builds = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
              and ast.unparse(node.func).split(".")[-1] in ("DDP", "DistributedDataParallel")]
    assert builds, "the recipe builds no DDP model any more: update this test"
    for call in builds:
        names = [k.arg for k in call.keywords]
        assert None not in names and not {"find_unused_parameters", "static_graph"} & set(names), ast.unparse(call)
        assert "_set_static_graph" not in ast.unparse(tree)
