"""From the machine and the user's choices to a launch plan, each choice with its reason.

Everything here takes the platform and the GPU inventory as arguments (the
seams), so the Windows, Linux+CUDA and CPU tables are all tested on Linux.
"""

from __future__ import annotations

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
from ddpstudio.core.plan import Plan, RecipeSpec, ScriptSpec
from ddpstudio.core.protocol import NO_NCCL_ENV, NO_NCCL_WINDOWS
from ddpstudio.core.platform import Platform
from ddpstudio.core.rendezvous.glooiface import pin

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
    return Decision(requested, f"{requested} CPU ranks: chosen by you")


def choose_store(platform: Platform, requested: str, script_style: str | None) -> Decision:
    if script_style == "env":
        if requested == "file":
            raise PolicyError("scripts written for torchrun read MASTER_ADDR/MASTER_PORT (env://); "
                              "a FileStore cannot be used with them: choose the tcp store or auto", "store")
        return Decision("tcp", "TCP store via env://: the script reads torchrun's environment variables")
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


def effective_batch(batch: int, world_size: int, mode: str) -> tuple[int, int]:
    """(per-rank batch, effective batch) for ``per-rank`` or ``split`` batch modes."""
    if mode == "split":
        if batch < world_size:
            raise PolicyError(f"a global batch of {batch} cannot be split over {world_size} ranks; "
                              f"use a batch of at least {world_size}", "batch_size")
        per_rank = batch // world_size
        return per_rank, per_rank * world_size
    if mode != "per-rank":
        raise PolicyError(f"unknown batch mode {mode!r}: choose per-rank or split", "batch_mode")
    return batch, batch * world_size


def split_note(asked: int, effective: int) -> str:
    """What a split batch that does not divide evenly leaves out ("" when it does)."""
    left = asked - effective
    if left <= 0:
        return ""
    return f" ({asked} does not split evenly: {left} sample{'s' if left != 1 else ''} per step left out)"


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
    backend = choose_backend(platform, machine, request.backend)
    device = "cuda" if backend.value == "nccl" or (machine.cuda_available and machine.gpu_count > 0) else "cpu"
    world = choose_world_size(machine, request.world_size, device)
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
    reasons = [backend.reason, world.reason, store.reason, exchange.reason]
    if compression.reason:
        reasons.append(compression.reason)
    env: dict[str, str] = {}

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
        if style == "args" and "env://" in request.script.dist_args:
            port = port or find_free_port()  # the template's env:// ranks meet at MASTER_ADDR:MASTER_PORT
            env.update(libuv_env(platform))
            reasons.append(f"your --dist-args say env://: every rank gets MASTER_ADDR=127.0.0.1 and "
                           f"MASTER_PORT={port} (a free port) for it")
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
    if request.script is not None and platform.is_windows:
        env[NO_NCCL_ENV] = NO_NCCL_WINDOWS  # a script's init_process_group("nccl") gets Gloo (rank/ncclswap.py)
    interpreter = rank_interpreter(console_python(sys.executable, platform), platform)
    env.update(interpreter.env)
    env.update(request.extra_env)

    recipe, eff, lr = request.recipe, None, None
    if recipe is not None:
        from ddpstudio.core.dataworkers import choose_workers, usable_cores

        per_rank, eff = effective_batch(recipe.batch_size, int(world.value), request.batch_mode)
        workers = choose_workers(recipe.workers, usable_cores(), int(world.value), platform, recipe.data)
        recipe = replace(recipe, batch_size=per_rank, workers=int(workers.value))
        reasons.append(workers.reason)
        lr = recipe.lr * (int(world.value) if recipe.scale_lr else 1)
        reasons.append(f"effective batch {eff} = {world.value} ranks x {per_rank} per rank"
                       + split_note(request.recipe.batch_size, eff)
                       + (f"; learning rate scaled to {lr:g}" if recipe.scale_lr else ""))
    return Plan(
        run_id=run_id, run_dir=str(run_dir), world_size=int(world.value), backend=str(backend.value),
        device=device, store=str(store.value), init_method=init_method, store_path=store_path,
        store_is_fixed=fixed, master_addr="127.0.0.1", master_port=port, env=env, reasons=reasons,
        rendezvous_timeout=request.rendezvous_timeout, python=interpreter.executable,
        recipe=recipe, script=request.script, effective_batch=eff, lr=lr,
        grad_exchange=str(exchange.value), grad_compression=str(compression.value),
        rank_helper=request.rank_helper, auto=auto_choices(request),
    )


def auto_choices(request: Request) -> list[str]:
    """Which of the plan's choices the request left to DDP Studio (``Plan.auto``)."""
    left = {"backend": request.backend == "auto", "world_size": request.world_size is None,
            "store": request.store == "auto" and not request.store_path,
            "grad_exchange": request.grad_exchange == "auto",
            "workers": request.recipe is not None and request.recipe.workers is None}
    return [name for name, is_auto in left.items() if is_auto]


def plan_file(plan: Plan) -> Path:
    return Path(plan.run_dir) / "plan.json"


def write_plan(plan: Plan) -> Path:
    """Create the run directory and write the plan into it."""
    os.makedirs(plan.run_dir, exist_ok=True)
    return plan.write(plan_file(plan))
