"""The run setup as the form holds it: plain values, saved between sessions and per run.

:meth:`SetupState.to_request` turns it into the core's
:class:`~ddpstudio.core.policy.Request`; :func:`from_plan` rebuilds it from a
past run's plan (runs started by the CLI have no saved form).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields

from ddpstudio.core import cmdline
from ddpstudio.core.plan import DEFAULT_DIST_ARGS, Plan, RecipeSpec, ScriptSpec
from ddpstudio.core.platform import Platform
from ddpstudio.core.policy import Request
from ddpstudio.core.scriptmodule import default_working_folder

WORKLOADS = ("recipe", "script-args", "script-env", "script-spawn")
# The form's workload for each script style, and back.
STYLE_WORKLOADS = {"args": "script-args", "env": "script-env", "spawn": "script-spawn"}
STORES = ("fresh", "fixed", "tcp")
COMMON_MODELS = ("resnet18", "resnet34", "resnet50", "mobilenet_v3_small", "mobilenet_v3_large",
                 "efficientnet_b0", "convnext_tiny", "vit_b_16",
                 "mlp")  # the built-in perceptron (rank/models.py): a run that checks the machine in seconds


@dataclass
class SetupState:
    workload: str = "recipe"  # recipe | script-args | script-env | script-spawn
    model: str = RecipeSpec.model
    data: str = RecipeSpec.data  # synthetic | folder | cifar10
    data_dir: str = ""
    image_size: int = RecipeSpec.image_size
    script_path: str = ""
    script_args: str = ""
    dist_args: str = DEFAULT_DIST_ARGS
    script_cwd: str = ""
    script_python: str = ""  # the Python the script's ranks run in; empty: DDP Studio's own (core/userpython.py)
    world_size: int = 0  # 0: one per GPU (2 on the CPU)
    backend: str = "auto"
    store: str = "fresh"  # fresh | fixed | tcp
    store_path: str = ""
    port: int = 0  # 0: a free one
    batch_size: int = RecipeSpec.batch_size
    batch_mode: str = "per-rank"  # per-rank | split
    accumulate: int = RecipeSpec.accumulate  # micro-batches per optimizer step
    balance: str = "auto"  # auto | equal | measured: per-rank batches for mixed GPUs (core/batchbalance.py)
    scale_lr: bool = False
    lr: float = RecipeSpec.lr  # the recipe's defaults, so the window and the CLI train alike
    epochs: int = RecipeSpec.epochs
    max_steps: int = 0  # 0: no limit
    workers: int = -1  # -1: chosen for the machine (the plan says how many and why)
    checkpoint_dir: str = ""
    checkpoint_every: int = 0  # 0: at each epoch's end only
    resume: bool = False
    keep_training: bool = False  # "Keep training if a rank crashes": restart the group, at most max_restarts times
    max_restarts: int = 3
    hang_timeout: int = 45  # seconds a rank may be still while the others wait (core/launch/hangs.py); 0: off
    on_hang: str = "warn"  # warn (and offer Stop) | stop (end the run failed); only while hang_timeout watches
    grad_exchange: str = "auto"  # auto | native | staged
    grad_compression: str = "none"  # none | fp16
    rank_helper: bool = True  # scripts: DDP Studio's start-up helper on the ranks' path
    one_gpu_per_rank: bool = False  # scripts: CUDA_VISIBLE_DEVICES gives each rank only its GPU
    lr_schedule: str = RecipeSpec.lr_schedule
    warmup_steps: int = 0
    eval_every: int = 0  # 0: at each epoch's end only
    gpus: list[str] = field(default_factory=list)  # the GPUs that train (UUIDs, the GPU cards' boxes); []: all

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict | None) -> "SetupState":
        """Tolerant of old or hand-edited settings: unknown keys and wrong types are dropped."""
        state = cls()
        if not isinstance(raw, dict):
            return state
        for f in fields(cls):
            value = raw.get(f.name)
            default = getattr(state, f.name)
            if value is None or isinstance(value, bool) != isinstance(default, bool):
                continue
            if isinstance(default, float) and isinstance(value, int):
                value = float(value)
            if isinstance(default, list):
                value = [item for item in value if isinstance(item, str)] if isinstance(value, list) else default
            if isinstance(value, type(default)):
                setattr(state, f.name, value)
        return state

    @property
    def is_script(self) -> bool:
        return self.workload.startswith("script")

    @property
    def script_style(self) -> str:
        return next((style for style, w in STYLE_WORKLOADS.items() if w == self.workload), "args")

    def working_folder(self) -> str | None:
        """The folder the script runs in: the one typed, else its default (core/scriptmodule.py
        ``default_working_folder``: the script's folder, or the folder above a package run with -m); None
        while the path names no script file (the check of the path says why)."""
        typed, path = self.script_cwd.strip(), self.script_path.strip()
        if typed or not path or not os.path.isfile(os.path.expanduser(path)):
            return typed or None
        return default_working_folder(path)

    def to_request(self, platform: Platform | None = None) -> Request:
        """The core's request; raises ValueError(field, message) for text that cannot be split.

        The script arguments are split by ``platform``'s rules (core/cmdline.py): a Windows path
        keeps its backslashes."""
        spawn = self.workload == STYLE_WORKLOADS["spawn"]  # the script decides its ranks: no world size
        if self.store == "fixed" and not self.store_path.strip():  # else it launched a fresh store, unsaid
            raise FieldError("store_path", "a FileStore at a fixed path needs the path: choose a file, or "
                                           "choose a fresh FileStore for each run")
        request = Request(backend=self.backend, world_size=None if spawn else self.world_size or None,
                          store={"fresh": "auto", "fixed": "file", "tcp": "tcp"}.get(self.store, self.store),
                          store_path=self.store_path.strip() or None if self.store == "fixed" else None,
                          port=self.port or None if self.store == "tcp" else None,
                          batch_mode=self.batch_mode, grad_exchange=self.grad_exchange,
                          grad_compression=self.grad_compression, rank_helper=self.rank_helper,
                          gpus=tuple(self.gpus) or None,
                          max_restarts=self.max_restarts if self.keep_training else 0,
                          hang_timeout=float(self.hang_timeout),
                          on_hang=self.on_hang if self.hang_timeout else "warn")  # nothing watched, nothing done
        if self.is_script:
            try:
                args = cmdline.split(self.script_args, platform)
            except ValueError as exc:
                raise FieldError("script_args", f"the script arguments cannot be split ({exc}); "
                                                "check the quotes") from exc
            request.script = ScriptSpec(path=self.script_path.strip(), args=args,
                                        style=self.script_style,
                                        dist_args=self.dist_args, cwd=self.working_folder(),
                                        one_gpu_per_rank=self.one_gpu_per_rank,
                                        python=self.script_python.strip() or None)
        else:
            request.recipe = RecipeSpec(
                model=self.model.strip(), data=self.data, data_dir=self.data_dir.strip() or None,
                epochs=self.epochs, max_steps=self.max_steps or None, batch_size=self.batch_size,
                accumulate=self.accumulate, checkpoint_every=self.checkpoint_every or None, lr=self.lr,
                scale_lr=self.scale_lr, image_size=self.image_size,
                workers=None if self.workers < 0 else self.workers,
                checkpoint_dir=self.checkpoint_dir.strip() or None, resume=self.resume,
                lr_schedule=self.lr_schedule, warmup_steps=self.warmup_steps, eval_every=self.eval_every or None)
            request.balance = self.balance  # the recipe's per-rank batches: a script's are its own
        return request


class FieldError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def from_plan(plan: Plan, platform: Platform | None = None) -> SetupState:
    """The form for "run again" of a run whose form was not saved (e.g. started from the CLI)."""
    state = SetupState(world_size=plan.world_size, backend=plan.backend, grad_exchange=plan.grad_exchange,
                       grad_compression=plan.grad_compression, rank_helper=plan.rank_helper,
                       gpus=list(plan.gpus or []),
                       keep_training=plan.max_restarts > 0, max_restarts=plan.max_restarts or SetupState.max_restarts,
                       hang_timeout=round(plan.hang_timeout), on_hang=plan.on_hang)
    if plan.store == "tcp":
        state.store = "tcp"
    elif plan.store_is_fixed and plan.store_path:
        state.store, state.store_path = "fixed", plan.store_path
    if plan.script is not None:
        s = plan.script
        state.workload = STYLE_WORKLOADS.get(s.style, "script-args")
        state.script_path, state.script_args = s.path, cmdline.join(s.args, platform)
        state.dist_args = s.dist_args
        state.script_cwd = s.cwd or ""
        if s.cwd and SetupState(script_path=s.path).working_folder() == s.cwd:
            state.script_cwd = ""  # the default, shown as such: it follows the script
        state.one_gpu_per_rank = s.one_gpu_per_rank
        state.script_python = s.python or ""
    elif plan.recipe is not None:
        r = plan.recipe
        state.model, state.data, state.data_dir, state.image_size = r.model, r.data, r.data_dir or "", r.image_size
        state.batch_size, state.scale_lr, state.lr = r.batch_size, r.scale_lr, r.lr  # per rank after any split
        state.epochs, state.max_steps = r.epochs, r.max_steps or 0
        state.workers = -1 if r.workers is None or "workers" in plan.auto else r.workers
        state.checkpoint_dir, state.resume = r.checkpoint_dir or "", r.resume
        state.accumulate, state.checkpoint_every = r.accumulate, r.checkpoint_every or 0
        state.lr_schedule, state.warmup_steps, state.eval_every = r.lr_schedule, r.warmup_steps, r.eval_every or 0
        state.balance = r.balance  # what the policy resolved; "auto" below when the run left it to DDP Studio
    # What the run left to DDP Studio stays automatic (issue 24: "run again" made it "chosen by you").
    defaults = SetupState()
    for name in ("backend", "world_size", "grad_exchange", "workers", "balance"):
        if name in plan.auto:
            setattr(state, name, getattr(defaults, name))
    return state
