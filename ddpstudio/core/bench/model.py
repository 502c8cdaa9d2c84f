"""The benchmark's values: what to measure (config), one measured run (row), the whole result.

Plain dataclasses, no Qt; ``BenchResult.to_dict()`` is what ``ddpstudio bench
--json`` prints and ``BenchResult.from_dict`` reads it back (docs/bench.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ddpstudio.core.policy import Request

COMPARISONS = ("backend", "store", "batch", "exchange")
OK, FAILED, STOPPED = "ok", "failed", "stopped"


@dataclass
class BenchConfig:
    """What to benchmark: the training (a run request) and how to measure it.

    ``request`` carries the same choices as a run (recipe or script, backend,
    store, batch mode); its ``world_size`` is replaced by each of
    ``world_sizes`` in turn. ``None`` world sizes: 1, 2, 4 ... up to the GPU
    count (1 and 2 on the CPU). ``compare`` adds whole sweeps with one choice
    flipped: "backend" (Gloo vs NCCL), "store" (FileStore vs TCP), "batch"
    (constant per-rank batch vs one global batch split over the ranks),
    "exchange" (native vs staged vs staged + fp16 gradient exchange).
    """

    request: Request
    world_sizes: list[int] | None = None
    steps: int = 20  # measured steps per world size
    warmup: int = 5  # steps run first and not counted (at least 1)
    compare: list[str] = field(default_factory=list)
    samples_per_epoch: int | None = None  # for the epoch estimate; default: the recipe's dataset
    script_batch_size: int | None = None  # per-rank batch of a user script, to turn steps/s into samples/s


@dataclass
class BenchRow:
    """One world size of one variant: the raw timings and the figures derived from them."""

    variant: str
    world_size: int
    backend: str
    store: str
    batch_mode: str
    per_rank_batch: int | None
    effective_batch: int | None
    warmup: int
    steps: int  # measured steps actually recorded
    step_times: list[float] = field(default_factory=list)  # rank 0's seconds per measured step
    step_time_s: float | None = None  # mean of step_times
    step_time_median_s: float | None = None
    steps_per_s: float | None = None
    samples_per_s: float | None = None  # effective batch x steps / sum(step_times)
    speedup: float | None = None  # samples/s over the smallest world size's, same variant
    efficiency: float | None = None  # speedup / (world size / smallest world size)
    time_to_first_step_s: float | None = None  # launch to rank 0's first step
    data_wait_fraction: float | None = None  # share of each measured step spent waiting for data
    gpu_util_pct: float | None = None  # mean utilisation of the ranks' GPUs while measuring
    steps_per_epoch: int | None = None
    epoch_time_s: float | None = None
    state: str = OK
    error: str | None = None
    run_dir: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == OK

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "BenchRow":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})


@dataclass
class BenchResult:
    """Every row, the plain-language verdict, and the machine the figures come from."""

    rows: list[BenchRow]
    verdict: str
    machine: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)  # model, batch, steps, warm-up, ...
    notes: list[str] = field(default_factory=list)  # comparisons skipped and why
    stopped: bool = False

    @property
    def variants(self) -> list[str]:
        """Variant labels in the order they ran (the first is the user's own choice)."""
        seen: list[str] = []
        for row in self.rows:
            if row.variant not in seen:
                seen.append(row.variant)
        return seen

    def rows_of(self, variant: str) -> list[BenchRow]:
        return [r for r in self.rows if r.variant == variant]

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "verdict": self.verdict, "machine": self.machine,
                "settings": self.settings, "notes": self.notes, "stopped": self.stopped}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "BenchResult":
        return cls(rows=[BenchRow.from_dict(r) for r in raw.get("rows", [])], verdict=raw.get("verdict", ""),
                   machine=raw.get("machine", {}), settings=raw.get("settings", {}),
                   notes=list(raw.get("notes", [])), stopped=bool(raw.get("stopped", False)))


@dataclass(frozen=True)
class BenchProgress:
    """Handed to ``on_progress`` (on the benchmark's thread) as each run moves on.

    ``phase``: "starting" (launched, waiting for the first step), "warmup",
    "measuring", "done" or "failed". ``run_index`` counts from 0 over ``runs``.
    """

    variant: str
    world_size: int
    run_index: int
    runs: int
    phase: str
    step: int = 0
    total_steps: int = 0
    message: str = ""
