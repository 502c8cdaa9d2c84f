"""The launch plan: everything the launcher needs, as one JSON file.

Front ends build it (through :mod:`ddpstudio.core.policy`), write it into the
run directory, and start ``python -m ddpstudio.core.launch.launcher PLAN.json``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ddpstudio.core.atomic import write_json

# The recipe's on-disk names: validation (core) and the ranks (rank/) agree through these.
CHECKPOINT_NAME = "checkpoint.pt"
MODEL_NAME = "model.pt"  # the final weights for prediction, beside the checkpoint
LR_SCHEDULES = ("constant", "step", "cosine")
CIFAR_FOLDER = "cifar-10-batches-py"
# The recipe's one model of its own (rank/models.py): a two-layer perceptron that needs no torchvision.
MLP_MODEL = "mlp"
# The synthetic data (rank/data.py): each image's noise is one tensor from each of three pools of
# SYNTHETIC_POOL, so SYNTHETIC_POOL**3 images differ; the held-out ones come after the training ones.
SYNTHETIC_POOL = 32
SYNTHETIC_VAL_SAMPLES = 512
SYNTHETIC_MAX_SAMPLES = SYNTHETIC_POOL**3 - SYNTHETIC_VAL_SAMPLES


def cifar_root(data_dir: str) -> Path:
    """CIFAR-10's root: the folder holding ``cifar-10-batches-py`` (or that folder itself)."""
    path = Path(data_dir)
    return path.parent if path.name == CIFAR_FOLDER else path


DEFAULT_DIST_ARGS = "--dist-url {url} --dist-backend {backend} --world-size {world_size} --rank {rank}"
# Spawn style: node-level settings for a script that starts one process per GPU itself (the
# PyTorch-on-Windows blog's command line; the script multiplies the world size by its GPUs).
DEFAULT_SPAWN_ARGS = "--dist-url {url} --dist-backend {backend} --world-size 1 --rank 0"


@dataclass
class RecipeSpec:
    """The built-in recipe: a torchvision classifier on synthetic/folder/CIFAR-10 data."""

    model: str = "resnet18"
    data: str = "synthetic"  # synthetic | folder | cifar10
    data_dir: str | None = None
    epochs: int = 1
    max_steps: int | None = None
    batch_size: int = 32  # per rank, after any split: one micro-batch when accumulating
    # equal | measured: each rank's batch sized for its speed after its first passes (rank/balance.py); the
    # global batch (batch_size x world size) is kept. The policy resolves --balance auto to one of these.
    balance: str = "equal"
    accumulate: int = 1  # micro-batches per optimizer step (gradient accumulation, DDP's no_sync on all but the last)
    lr: float = 0.02
    scale_lr: bool = False  # lr x world_size x accumulate: the effective batch over one micro-batch (linear rule)
    image_size: int = 32
    num_classes: int = 10
    synthetic_samples: int = 4096
    workers: int | None = None  # DataLoader workers per rank; None: chosen for the machine (core/dataworkers.py)
    amp: bool = True  # only takes effect on CUDA
    checkpoint_dir: str | None = None
    checkpoint_every: int | None = None  # also save every N optimizer steps (always at each epoch's end)
    resume: bool = False
    log_every: int = 1
    seed: int = 0
    threads: int = 1  # torch intra-op threads per rank on the CPU
    eval_every: int | None = None  # also evaluate every N steps (always at each epoch's end)
    lr_schedule: str = "constant"  # one of LR_SCHEDULES
    warmup_steps: int = 0


@dataclass
class ScriptSpec:
    """A user's script: ``args`` style (PyTorch examples), ``env`` style (torchrun), or ``spawn`` style
    (started once; it starts its own ranks with ``torch.multiprocessing.spawn``)."""

    path: str = ""
    args: list[str] = field(default_factory=list)
    style: str = "args"  # args | env | spawn
    dist_args: str = DEFAULT_DIST_ARGS
    cwd: str | None = None  # working directory of the ranks; None keeps the launcher's
    one_gpu_per_rank: bool = False  # CUDA_VISIBLE_DEVICES: each rank sees only its own GPU, as cuda:0
    # Env style: the script's own --local-rank/--local_rank option (core/envstyle.py), given "=N" to each
    # rank as torch.distributed.launch did; None when it declares none. Set by the plan, from the script.
    local_rank_option: str | None = None
    # Run as ``python -m module`` (core/scriptmodule.py), found from the folder above its top package: a
    # script that imports relatively or imports its own package. Set by the plan from the script, or by
    # ``--module``; None runs ``path`` as a file.
    module: str | None = None
    # The Python the ranks run in, as the user gave it (core/userpython.py: checked, and the rank helper
    # given DDP Studio's package); None runs them in DDP Studio's own.
    python: str | None = None

    def entry(self) -> list[str]:
        """What follows ``python -u``: the script's path, or ``-m`` and its module."""
        return ["-m", self.module] if self.module else [self.path]


# The recipe with one rank trains the bare model (rank/onerank.py): DDP's per-parameter bucket work would be
# spent on a process that has no one to exchange with. A plan for several machines says its exchange instead.
ONE_RANK_EXCHANGE = ("no gradient exchange: one rank has no one to exchange with, so the model trains "
                     "without DistributedDataParallel's per-step bucket work")

AUTO_CHOICES = ("backend", "world_size", "store", "grad_exchange", "workers", "balance")


@dataclass
class Plan:
    run_id: str
    run_dir: str
    world_size: int
    backend: str  # gloo | nccl
    device: str  # cuda | cpu
    store: str  # file | tcp
    init_method: str
    store_path: str | None = None
    store_is_fixed: bool = False
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    rendezvous_timeout: float = 120.0
    grace_period: float = 5.0
    python: str = ""
    recipe: RecipeSpec | None = None
    script: ScriptSpec | None = None
    effective_batch: int | None = None
    lr: float | None = None
    grad_exchange: str = "native"  # native | staged (core.exchange.choice.GradExchange)
    grad_compression: str = "none"  # none | fp16
    rank_helper: bool = True  # user scripts get the start-up helper (ddpstudio/rank/helper)
    origin: str = "run"  # run | bench: who started it (the scaling benchmark's runs are kept as runs too)
    nodes: int = 1  # machines in the run (core/nodes, docs/multi-machine.md); world_size counts all their ranks
    node_rank: int = 0  # this machine's place: its ranks are node_rank x ranks_per_node + local rank
    gpus: list[str] | None = None  # the GPUs chosen to train on (UUIDs: core/gpu/selection.py); None: all
    max_restarts: int = 0  # a rank that dies restarts the group this often at most (core/launch/restart.py)
    # A rank still this many seconds while the others wait is stuck (core/launch/hangs.py); 0: not watched.
    hang_timeout: float = 45.0  # plus a beat (4.5 s) and a look: named within 60 s (issue 25 §3)
    on_hang: str = "warn"  # warn (say it, dump its stack, offer Stop) | stop (end the run failed)
    # The choices left to DDP Studio (of AUTO_CHOICES): "run again" keeps them automatic, so a run from a
    # CPU machine still adapts to a GPU machine. Plans written before this field list none.
    auto: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "recipe" if self.recipe is not None else "script"

    @property
    def ranks_per_node(self) -> int:
        return self.world_size // max(1, self.nodes)

    def local_ranks(self) -> range:
        """The global ranks this machine's launcher starts (all of them on a single machine)."""
        return range(self.node_rank * self.ranks_per_node, (self.node_rank + 1) * self.ranks_per_node)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, path: str | os.PathLike) -> Path:
        """Write atomically (temp file + rename) so a reader never sees half a plan."""
        return write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "Plan":
        raw = dict(raw)
        known = {f.name for f in fields(cls)}
        recipe = raw.pop("recipe", None)
        script = raw.pop("script", None)
        plan = cls(**{k: v for k, v in raw.items() if k in known})
        plan.recipe = RecipeSpec(**recipe) if recipe else None
        plan.script = ScriptSpec(**script) if script else None
        return plan

    @classmethod
    def read(cls, path: str | os.PathLike) -> "Plan":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
