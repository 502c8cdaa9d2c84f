"""From the machine and the user's choices to a launch plan, each choice with its reason.

Everything here takes the platform and the GPU inventory as arguments (the
seams), so the Windows, Linux+CUDA and CPU tables are all tested on Linux.
"""

from __future__ import annotations

import ast
import ntpath
import os
import posixpath
import sys
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Protocol

from ddpstudio.core import paths
from ddpstudio.core.decision import Decision
from ddpstudio.core.exchange import choice as exchange_choice
from ddpstudio.core.plan import DEFAULT_DIST_ARGS, DEFAULT_SPAWN_ARGS, ONE_RANK_EXCHANGE, Plan, RecipeSpec, ScriptSpec
from ddpstudio.core.protocol import NO_NCCL_ENV, NO_NCCL_NO_GPU, NO_NCCL_WINDOWS
from ddpstudio.core.platform import Platform
from ddpstudio.core.rendezvous.glooiface import pin
from ddpstudio.core.words import counted

CPU_WORLD_SIZE = 2


class PolicyError(ValueError):
    """A choice that cannot work on this machine; the message says what to do instead."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class Machine(Protocol):
    """What policy needs to know of the GPU inventory."""

    @property
    def gpu_count(self) -> int: ...

    @property
    def cuda_available(self) -> bool: ...


@dataclass
class Request:
    """What the user asked for; ``None``/"auto" means "choose for me"."""

    backend: str = "auto"  # auto | gloo | nccl
    world_size: int | None = None
    store: str = "auto"  # auto | file | tcp
    store_path: str | None = None  # a fixed FileStore path (or file:// URL) instead of a fresh one
    port: int | None = None
    batch_mode: str = "per-rank"  # per-rank | split (the batch given is the global batch)
    rendezvous_timeout: float = 120.0
    recipe: RecipeSpec | None = None
    script: ScriptSpec | None = None
    run_id: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    grad_exchange: str = "auto"  # auto | native | staged
    grad_compression: str = "none"  # none | fp16
    rank_helper: bool = True  # user scripts: the start-up helper that reports ranks and stages gradients
    oversubscribe: bool = False  # more CPU ranks than the machine's cores and memory hold (core.capacity)
    gpus: tuple[str, ...] | None = None  # the GPUs to train on, by torch's number or UUID (core/gpu/selection)
    max_restarts: int = 0  # a rank that dies restarts the group, at most this often (core/launch/restart.py)
    hang_timeout: float = Plan.hang_timeout  # a rank still this long while the others wait is stuck (core/launch/hangs.py)
    on_hang: str = "warn"  # warn | stop
    balance: str = "auto"  # auto | equal | measured: the recipe's per-rank batches (core/batchbalance.py)


def choose_backend(platform: Platform, machine: Machine, requested: str = "auto") -> Decision:
    cuda = machine.cuda_available and machine.gpu_count > 0
    if requested not in ("auto", "gloo", "nccl"):
        raise PolicyError(f"unknown backend {requested!r}: choose auto, gloo or nccl", "backend")
    if requested == "nccl":
        if platform.is_windows:
            raise PolicyError("NCCL does not exist in PyTorch for Windows; use the gloo backend (or auto)", "backend")
        if not cuda:
            raise PolicyError("NCCL needs CUDA GPUs and none were found; use the gloo backend (or auto)", "backend")
        return Decision("nccl", "NCCL: chosen by you")
    if requested == "gloo":
        return Decision("gloo", "Gloo: chosen by you" + ("" if cuda or platform.is_windows else " (CPU training)"))
    if platform.is_windows:
        return Decision("gloo", "Gloo: NCCL is not built into PyTorch for Windows")
    if cuda:
        return Decision("nccl", f"NCCL: the fastest backend for CUDA GPUs on {platform.name}")
    return Decision("gloo", "Gloo on the CPU: no CUDA GPU was found")


def choose_world_size(machine: Machine, requested: int | None, device: str) -> Decision:
    if requested is not None and requested < 1:
        raise PolicyError(f"world size must be at least 1 (got {requested})", "world_size")
    if device == "cuda":
        count = machine.gpu_count
        if requested is None:
            return Decision(count, f"{count} rank{'s' if count != 1 else ''}: one per GPU")
        if requested > count:
            raise PolicyError(
                f"asked for {requested} ranks but this machine has {count} GPU{'s' if count != 1 else ''}; "
                f"use a world size of at most {count}, one rank per GPU", "world_size")
        return Decision(requested, f"{requested} of {count} GPUs: chosen by you")
    if requested is None:
        return Decision(CPU_WORLD_SIZE, f"{CPU_WORLD_SIZE} ranks on the CPU (no GPU found)")
    return Decision(requested, f"{counted(requested, 'CPU rank')}: chosen by you")


def choose_store(platform: Platform, requested: str, script_style: str | None) -> Decision:
    if script_style == "env":
        if requested == "file":
            raise PolicyError("scripts written for torchrun read MASTER_ADDR/MASTER_PORT (env://); "
                              "a FileStore cannot be used with them: choose the tcp store or auto", "store")
        return Decision("tcp", "TCP store via env://: in env style each rank gets torchrun's environment variables")
    if requested not in ("auto", "file", "tcp"):
        raise PolicyError(f"unknown store {requested!r}: choose auto, file or tcp", "store")
    if requested == "tcp":
        why = " (libuv switched off: Windows wheels are built without it)" if platform.is_windows else ""
        return Decision("tcp", "TCP store on the loopback address: chosen by you" + why)
    if requested == "file":
        return Decision("file", "FileStore: chosen by you")
    if platform.is_windows:
        return Decision("file", "FileStore in a fresh file: the most reliable rendezvous on Windows "
                                "(TCPStore needs libuv, which Windows wheels lack)")
    return Decision("file", "FileStore in a fresh file: no port to collide with, nothing left to reuse")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def interface_addresses() -> dict[str, list[str]]:
    """Each adapter's addresses in psutil's order (on Windows named by FriendlyName: core/rendezvous/glooiface)."""
    import psutil

    return {name: [a.address for a in addrs] for name, addrs in psutil.net_if_addrs().items()}


def loopback_interface(interfaces: dict[str, list[str]] | None = None) -> str | None:
    """The name of the network interface that carries 127.0.0.1, for GLOO_SOCKET_IFNAME."""
    if interfaces is None:
        interfaces = interface_addresses()
    for name, addresses in interfaces.items():
        if "127.0.0.1" in addresses:
            return name
    return None


def effective_batch(batch: int, world_size: int, mode: str, accumulate: int = 1) -> tuple[int, int]:
    """(per-rank micro-batch, effective batch) for ``per-rank`` or ``split`` batch modes.

    The effective batch is what one optimizer step sees: ranks x micro-batch x ``accumulate``. Split
    divides the batch given over ranks x ``accumulate`` (it is the effective batch)."""
    parts = world_size * max(1, accumulate)
    if mode == "split":
        if batch < parts:
            over = f"{world_size} ranks" + (f" x {accumulate} micro-batches" if accumulate > 1 else "")
            raise PolicyError(f"a global batch of {batch} cannot be split over {over}; "
                              f"use a batch of at least {parts}", "batch_size")
        per_rank = batch // parts
        return per_rank, per_rank * parts
    if mode != "per-rank":
        raise PolicyError(f"unknown batch mode {mode!r}: choose per-rank or split", "batch_mode")
    return batch, batch * parts


def batch_reason(effective: int, world_size: int, per_rank: int, accumulate: int, lr: float | None,
                 split: int | None = None) -> str:
    """The plan's line on the effective batch and, when scaled, the learning rate (the window says the same).
    ``split``: the batch given in split mode, whose rounding down is said (issue 27: 3 over 2 ranks trains 2)."""
    text = f"effective batch {effective} = {counted(world_size, 'rank')} x {per_rank} per rank"
    if accumulate > 1:
        text += f" x {accumulate} micro-batches accumulated per optimizer step"
    if split is not None:
        text += split_note(split, effective, world_size, accumulate)
    if lr is not None:
        text += (f"; learning rate scaled to {lr:g} (x{world_size * accumulate}: the effective batch over one "
                 "rank's micro-batch, the linear scaling rule)")
    return text


def split_note(asked: int, effective: int, world_size: int, accumulate: int = 1) -> str:
    """What a split batch that does not divide evenly leaves out, in the plan's and the form's words ("" when
    it divides): 33 over 2 ranks trains 32 (issues 24 and 27: never unsaid)."""
    left = asked - effective
    if left <= 0:
        return ""
    over = f"{world_size} ranks" + (f" x {accumulate} micro-batches" if accumulate > 1 else "")
    return (f" (your batch of {asked} does not split evenly over {over}: rounded down to {effective}, {left} "
            f"sample{'s' if left != 1 else ''} per step left out; give a multiple of {world_size * accumulate} to "
            "train with all of it)")


def choose_grad_exchange(request: Request, backend: str, device: str,
                    probe: Callable[[], str | None] | None = None) -> tuple[Decision, Decision]:
    """The gradient exchange and compression; ``probe`` gives the Gloo CUDA all-reduce check's outcome.

    The probe is asked only when it matters (Gloo on CUDA); by default its cached outcome is read.
    """
    outcome = None
    if backend == "gloo" and device == "cuda":
        if probe is None:
            from ddpstudio.core.exchange.probe import cached_outcome as probe
        outcome = probe()
    try:
        mode = exchange_choice.choose_exchange(request.grad_exchange, backend, device, outcome)
        compression = exchange_choice.choose_compression(request.grad_compression)
    except exchange_choice.ExchangeError as exc:
        raise PolicyError(str(exc), exc.field) from exc
    return Decision(mode.value, mode.reason), Decision(compression.value, compression.reason)


def build_plan(request: Request, platform: Platform, machine: Machine,
               interfaces: dict[str, list[str]] | None = None,
               probe: Callable[[], str | None] | None = None) -> Plan:
    """Decide everything; raises :class:`PolicyError` for choices that cannot work.

    ``probe`` is the seam for the Gloo CUDA all-reduce check (see :func:`choose_grad_exchange`).
    """
    from ddpstudio.core.launch.commands import console_python, gpu_problem
    from ddpstudio.core.launch.interpreter import rank_interpreter
    from ddpstudio.core.rendezvous.ports import find_free_port, libuv_env, tcp_init_url
    from ddpstudio.core.rendezvous.asciipath import safe_store_folder, safe_store_path
    from ddpstudio.core.rendezvous.storeurl import file_store_url, store_path_from_url

    if (request.recipe is None) == (request.script is None):
        raise PolicyError("choose exactly one thing to train: the built-in recipe or a script", "workload")
    style = request.script.style if request.script else None
    script, read_reasons, joins_by_env, tree = _script_as_read(request.script)
    backend = choose_backend(platform, machine, request.backend)
    device = "cuda" if backend.value == "nccl" or (machine.cuda_available and machine.gpu_count > 0) else "cpu"
    gpus, world = _gpus_and_world(request, machine, device)
    gpus_asked = gpu_problem(request.script, device)
    if gpus_asked:
        raise PolicyError(gpus_asked, "one_gpu_per_rank" if request.script.one_gpu_per_rank else "dist_args")
    if style == "spawn":
        world = Decision(1, "the script is started once and starts its own ranks (spawn style); the world "
                            "size is the one its ranks report when they join")
    if device == "cpu" and not request.oversubscribe:
        from ddpstudio.core.capacity import measure

        too_many = measure().problem(int(world.value))
        if too_many:
            raise PolicyError(too_many, "world_size")
    store = choose_store(platform, request.store, style)
    run_id = request.run_id or new_run_id()
    run_dir = paths.runs_dir() / run_id
    exchange, compression = choose_grad_exchange(request, str(backend.value), device, probe)
    exchange_reason = exchange.reason
    if request.recipe is not None and int(world.value) == 1:
        exchange_reason = ONE_RANK_EXCHANGE  # rank/onerank.py
    reasons = [backend.reason, *([gpus.reason()] if gpus else []), world.reason, store.reason, exchange_reason]
    if compression.reason:
        reasons.append(compression.reason)
    env: dict[str, str] = {"CUDA_VISIBLE_DEVICES": gpus.visible} if gpus else {}

    store_path, fixed, port = None, False, request.port
    if store.value == "file":
        if request.store_path:
            raw = request.store_path
            store_path = store_path_from_url(raw, platform) if raw.startswith("file:") else raw
            try:
                safe = safe_store_path(store_path, platform)
            except ValueError as exc:
                raise PolicyError(str(exc), "store_path") from None
            store_path, fixed = safe.path, True
            # Instead of the store's own reason, which (with store "auto") said "in a fresh file".
            reasons[reasons.index(store.reason)] = f"FileStore at your fixed path {store_path}"
        else:
            safe = safe_store_folder(paths.store_dir(), platform)
            store_path = (ntpath if platform.is_windows else posixpath).join(safe.path, f"{run_id}.store")
        if safe.note:
            reasons.append(safe.note)
        init_method = file_store_url(store_path, platform)
        if style == "args" and ("env://" in script.dist_args or joins_by_env):
            port = port or find_free_port()  # the template's env:// ranks meet at MASTER_ADDR:MASTER_PORT
            env.update(libuv_env(platform))
            said = "your --dist-args say env://" if "env://" in script.dist_args else \
                "the script calls init_process_group without an init_method (env://)"
            reasons.append(f"{said}: every rank gets MASTER_ADDR=127.0.0.1 and MASTER_PORT={port} (a free port) "
                           "for it")
    else:
        port = port or find_free_port()
        init_method = "env://" if style == "env" else tcp_init_url("127.0.0.1", port, platform)
        env.update(libuv_env(platform))
    if backend.value == "gloo":
        interfaces = interface_addresses() if interfaces is None else interfaces
        iface = loopback_interface(interfaces)
        pinned = pin(iface, "127.0.0.1", interfaces.get(iface, []), platform.is_windows) if iface else None
        if pinned is not None and pinned.ifname is None:
            reasons.append(pinned.why)
        elif iface:
            env["GLOO_SOCKET_IFNAME"] = iface
            reasons.append(f"Gloo pinned to the loopback interface ({iface}) so VPN or virtual "
                           "adapters cannot break a single-machine run")
    if request.script is not None and (platform.is_windows or device == "cpu"):
        # A script's init_process_group("nccl") gets Gloo (rank/ncclswap.py): Windows has no NCCL, and a run
        # on the CPU has no GPU for it ("ProcessGroupNCCL is only supported with GPUs, no GPUs found!").
        env[NO_NCCL_ENV] = NO_NCCL_WINDOWS if platform.is_windows else NO_NCCL_NO_GPU
    accelerate = _accelerate_stays_alone(tree, style) if script is not None and device == "cpu" else None
    if accelerate:
        env[ACCELERATE_CPU] = "1"
        reasons.append(f"{ACCELERATE_CPU}=1 for every rank: the script uses {accelerate}, which joins the ranks on "
                       "a machine without GPUs only when told to use the CPU (each rank would train alone)")
    reasons.extend(read_reasons)
    if script is not None:
        from ddpstudio.core.scriptbatch import script_batch_reason

        said = script_batch_reason(tree, script.args, None if style == "spawn" else int(world.value))
        reasons += [said] if said else []
    if script is not None and script.local_rank_option:
        reasons.append(f"each rank also gets {script.local_rank_option}=N (its rank on this machine): the script "
                       "takes that option, which torch.distributed.launch gave it")
    if script is not None and script.python:
        interpreter = _user_interpreter(script.python, platform, device, request.rank_helper, env, reasons)
    else:
        interpreter = rank_interpreter(console_python(sys.executable, platform), platform)
        if script is not None:
            from ddpstudio.core.userpython import active_environment_note

            note = active_environment_note(dict(os.environ), sys.prefix, platform)
            reasons += [note] if note else []
    env.update(interpreter.env)
    env.update(request.extra_env)

    recipe, eff, lr = request.recipe, None, None
    if recipe is not None:
        from ddpstudio.core.dataworkers import choose_workers, usable_cores

        per_rank, eff = effective_batch(recipe.batch_size, int(world.value), request.batch_mode, recipe.accumulate)
        workers = choose_workers(recipe.workers, usable_cores(), int(world.value), platform, recipe.data)
        if recipe.workers is not None:
            workers = _workers_that_fit(workers, int(world.value), request.oversubscribe)
        balanced = _balance(request, device, machine, gpus, int(world.value), per_rank)
        recipe = replace(recipe, batch_size=per_rank, workers=int(workers.value), balance=str(balanced.value))
        reasons.append(workers.reason)
        if balanced.reason:
            reasons.append(balanced.reason)
        lr = recipe.lr * (int(world.value) * recipe.accumulate if recipe.scale_lr else 1)
        reasons.append(batch_reason(eff, int(world.value), per_rank, recipe.accumulate,
                                    lr if recipe.scale_lr else None,
                                    request.recipe.batch_size if request.batch_mode == "split" else None))
    if request.max_restarts:
        reasons.append(restart_reason(request.max_restarts, recipe))
    if request.on_hang == "stop" and request.hang_timeout > 0:
        reasons.append(f"a rank stuck for {request.hang_timeout:g} s while the others wait ends the run (--on-hang stop)")
    return Plan(
        run_id=run_id, run_dir=str(run_dir), world_size=int(world.value), backend=str(backend.value),
        device=device, store=str(store.value), init_method=init_method, store_path=store_path,
        store_is_fixed=fixed, master_addr="127.0.0.1", master_port=port, env=env, reasons=reasons,
        rendezvous_timeout=request.rendezvous_timeout, python=interpreter.executable,
        recipe=recipe, script=script, effective_batch=eff, lr=lr,
        grad_exchange=str(exchange.value), grad_compression=str(compression.value),
        rank_helper=request.rank_helper, gpus=gpus.ids if gpus else None,
        max_restarts=request.max_restarts, auto=auto_choices(request),
        hang_timeout=request.hang_timeout, on_hang=request.on_hang,
    )


def _user_interpreter(python: str, platform: Platform, device: str, helper: bool, env: dict[str, str],
                      reasons: list[str]):
    """The interpreter the user chose for the script's ranks, checked (core/userpython.py); the rank helper is
    told where DDP Studio's package is."""
    from ddpstudio.core import userpython
    from ddpstudio.core.launch.interpreter import rank_interpreter

    try:
        facts = userpython.check(python, platform, needs_cuda=device == "cuda", helper=helper)
    except userpython.UserPythonError as exc:
        raise PolicyError(str(exc), "python") from None
    if helper:
        env[userpython.PACKAGE_DIR_ENV] = userpython.package_dir()
    reasons.append(facts.reason(helper))
    return rank_interpreter(facts.path, platform, base_executable=facts.base_executable, in_venv=facts.in_venv)


# accelerate/state.py (1.16) PartialState._prepare_backend: with LOCAL_RANK set but no GPU, no distributed type is
# found unless ``cpu`` is true, which Accelerator.__init__ sets from this variable: each process is then alone
# (num_processes 1), although torchrun or DDP Studio started several and they even join a process group.
ACCELERATE_CPU = "ACCELERATE_USE_CPU"
# Built on Accelerate's state, in the words of the plan's line. Transformers' Trainer: transformers/training_args.py
# (5.25) _setup_devices gives PartialState cpu=True only "if self.use_cpu or ACCELERATE_USE_CPU" (each rank trained
# alone without either, under torchrun and DDP Studio alike: world_size 1, 2026-12-08); TRL's and
# sentence-transformers' trainers are the Trainer.
ACCELERATE_BASED = {"accelerate": "Accelerate", "transformers": "Transformers' Trainer (built on Accelerate)",
                    "trl": "TRL's trainers (built on Accelerate)",
                    "sentence_transformers": "sentence-transformers' trainer (built on Accelerate)"}


def _accelerate_stays_alone(tree: ast.Module | None, style: str | None) -> str | None:
    """What an env-style script on the CPU is built on, in words, when that is Accelerate and the user has not set
    ACCELERATE_USE_CPU; else None."""
    from ddpstudio.core.liblaunch import imported_roots

    if style != "env" or ACCELERATE_CPU in os.environ or tree is None:
        return None
    used = imported_roots(tree)
    return next((words for root, words in ACCELERATE_BASED.items() if root in used), None)


def _script_as_read(spec: ScriptSpec | None) -> tuple[ScriptSpec | None, list[str], bool, ast.Module | None]:
    """What the script's source decides of its spec, with the reasons: the default args template fitted to
    the options it declares (core/argsfit.py), its torch.distributed.launch option in env style
    (core/envstyle.py), whether it runs as a module of its package (core/scriptmodule.py); whether it
    joins by env:// itself; and its syntax tree, for the plan's other readings."""
    if spec is None:
        return None, [], False, None
    from ddpstudio.core.argsfit import fit_template
    from ddpstudio.core.envstyle import joins_by_env, local_rank_option
    from ddpstudio.core.scriptargs import parse_script
    from ddpstudio.core.scriptmodule import module_entry, module_root
    from ddpstudio.core.scriptstyle import read_source

    tree = parse_script(read_source(spec.path))  # once, for every reading
    reasons = []
    if spec.style in ("args", "spawn") and spec.dist_args in (DEFAULT_DIST_ARGS, DEFAULT_SPAWN_ARGS):
        fitted = fit_template(spec.dist_args, tree, spawn=spec.style == "spawn")
        spec = replace(spec, dist_args=fitted.template)
        reasons += [fitted.why] if fitted.why else []
    if spec.style == "env":
        spec = replace(spec, local_rank_option=local_rank_option(tree))
    entry = module_entry(spec.path, tree)
    if spec.module and (entry is None or entry.name != spec.module):
        reasons.append(f"the script runs as python -m {spec.module}, found from "
                       f"{module_root(spec.path, spec.module)}: chosen by you (--module)")
    elif entry is not None:
        spec = replace(spec, module=entry.name)
        reasons.append(entry.why)
    return spec, reasons, joins_by_env(tree), tree


def _gpus_and_world(request: Request, machine: Machine, device: str):
    """The GPUs the request chose (a :class:`~ddpstudio.core.gpu.selection.GpuChoice`, None for all of them)
    and the world size: one rank per chosen GPU."""
    from ddpstudio.core.gpu import selection

    if request.gpus is None:
        return None, choose_world_size(machine, request.world_size, device)
    try:
        if device != "cuda":
            raise selection.cpu_refusal(request.gpus, getattr(machine, "why", "no CUDA GPU was found"))
        gpus = selection.choose_gpus(request.gpus, getattr(machine, "gpus", ()),
                                     os.environ.get("CUDA_VISIBLE_DEVICES"))
        return gpus, gpus.ranks(request.world_size)
    except selection.SelectionError as exc:
        raise PolicyError(str(exc), exc.field) from None


def _balance(request: Request, device: str, machine: Machine, gpus, world_size: int, per_rank: int) -> Decision:
    """Equal or measured batches for the recipe (core/batchbalance.py), from the GPUs the ranks use."""
    from ddpstudio.core.batchbalance import BalanceError, choose_balance

    names = [gpu.name for gpu in (gpus.gpus if gpus else getattr(machine, "gpus", ()))]
    try:
        return choose_balance(request.balance, device, names, world_size, per_rank * world_size)
    except BalanceError as exc:
        raise PolicyError(str(exc), "balance") from None


def restart_reason(max_restarts: int, recipe: RecipeSpec | None) -> str:
    """What ``--max-restarts`` will do for this run, in the plan's words."""
    text = f"a rank that dies restarts the whole group, at most {max_restarts} time(s)"
    if recipe is None:
        return text + ": your script starts again from its beginning, as under torchrun; resuming is its own business"
    if not recipe.checkpoint_dir:
        return text + ": no checkpoint folder, so each restart trains again from step 0"
    every = f"every {recipe.checkpoint_every} steps and " if recipe.checkpoint_every else ""
    return text + f", from the last checkpoint (saved {every}at each epoch's end; from step 0 before the first)"


def _workers_that_fit(workers: Decision, ranks: int, oversubscribe: bool) -> Decision:
    """The user's --workers, bounded by the machine (core/capacity.py) unless they oversubscribe."""
    from ddpstudio.core.capacity import worker_room

    room = worker_room()
    if not oversubscribe:
        too_many = room.problem(int(workers.value), ranks)
        if too_many:
            raise PolicyError(too_many, "workers")
        return workers
    most = room.most(ranks)
    if int(workers.value) <= most:
        return workers
    return Decision(workers.value, f"{workers.reason} (past the {most} per rank this machine holds: "
                                   "--oversubscribe)")


def auto_choices(request: Request) -> list[str]:
    """Which of the plan's choices the request left to DDP Studio (``Plan.auto``)."""
    left = {"backend": request.backend == "auto", "world_size": request.world_size is None,
            "store": request.store == "auto" and not request.store_path,
            "grad_exchange": request.grad_exchange == "auto",
            "workers": request.recipe is not None and request.recipe.workers is None,
            "balance": request.recipe is not None and request.balance == "auto"}
    return [name for name, is_auto in left.items() if is_auto]


def plan_file(plan: Plan) -> Path:
    return Path(plan.run_dir) / "plan.json"


def write_plan(plan: Plan) -> Path:
    """Create the run directory and write the plan into it."""
    os.makedirs(plan.run_dir, exist_ok=True)
    return plan.write(plan_file(plan))
