"""What the rank helper installs into a user's script once the script imports ``torch.distributed``.

- importing ``torch.distributed`` -> ``rank_watched`` (the launcher then knows
  this rank is seen from inside: it joins by ``rank_joined`` only, and a run
  where none does is "not a distributed script");
- ``init_process_group`` -> a ``rank_joined`` event (rank, world size,
  backend, device, pid, and the gradient exchange this rank really runs);
  in a multi-machine run it meets at the host's store through a client
  built without libuv (:mod:`ddpstudio.rank.hoststore`, pytorch #148283);
  ``destroy_process_group`` -> ``rank_left``.
- NCCL asked for where there is none (Windows builds): Gloo instead, in
  ``init_process_group`` and ``new_group`` (:mod:`ddpstudio.rank.ncclswap`);
  ``rank_joined`` says ``asked_backend: "nccl"`` and rank 0 warns once.
- Exchange ``staged`` (pytorch #186535): ``all_reduce`` of a CUDA tensor on a
  Gloo group is done on a CPU copy, and every ``DistributedDataParallel`` on
  a Gloo group gets the staged communication hook (:mod:`ddpstudio.rank.staged`).
- Compression ``fp16``: DDP on a Gloo group gets the float16 hook of its mode.
- once the group exists, each optimizer step with the loss its backward
  passes ran on and the samples its DDP forwards took, as ``step`` events
  (:mod:`ddpstudio.rank.stepwatch`, :mod:`ddpstudio.rank.steploss`), and a
  heartbeat with the script's step and phase for the launcher's hang watch
  (:mod:`ddpstudio.rank.scriptbeat`), when it watches;
- Exchange ``staged`` with ``find_unused_parameters`` or ``static_graph``: a
  warning before training (the reducer's own all-reduce, :mod:`ddpstudio.rank.usedmap`).

:func:`install` runs while ``import torch`` is still under way (torch imports
``torch.distributed`` from its ``__init__``), so it only swaps attributes;
torch's other modules are imported later, inside the wrappers.
"""

from __future__ import annotations

import functools
import os
import sys
from types import ModuleType
from typing import Any

from ddpstudio.core import protocol
from ddpstudio.core.exchange.choice import COMPRESSION_ENV, EXCHANGE_ENV
from ddpstudio.rank.emit import Emitter, rank_from_env

MARK = "_ddpstudio_hooked"
WARNED = "_ddpstudio_used_map_warned"  # on a DDP model: told once about its reducer's own all-reduce


def settings() -> tuple[str, str]:
    """(exchange mode, compression) the launcher asked for."""
    return os.environ.get(EXCHANGE_ENV, "native"), os.environ.get(COMPRESSION_ENV, "none")


def install(dist: ModuleType) -> None:
    """Wrap ``dist``'s functions (and ``distributed_c10d``'s, which torch itself calls); once only."""
    if getattr(dist, MARK, False) or not dist.is_available():
        return
    setattr(dist, MARK, True)
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    mode, compression = settings()
    state = _State(dist, Emitter(rank_from_env()), mode, compression)
    wrappers = {"init_process_group": state.wrap_init, "destroy_process_group": state.wrap_destroy,
                "new_group": state.wrap_new_group}
    if mode == "staged":
        wrappers["all_reduce"] = state.wrap_all_reduce
    for name, wrap in wrappers.items():
        original = getattr(dist, name)
        wrapped = wrap(original)
        setattr(dist, name, wrapped)
        if c10d is not None and getattr(c10d, name, None) is original:
            setattr(c10d, name, wrapped)
    state.emitter.emit(protocol.RANK_WATCHED, pid=os.getpid(), source="rank helper")


class _State:
    def __init__(self, dist: ModuleType, emitter: Emitter, mode: str, compression: str) -> None:
        self.dist, self.emitter, self.mode, self.compression = dist, emitter, mode, compression
        self.asked_backend: str | None = None  # what the script asked for, when it got Gloo instead
        self.swap_said = False

    def running_mode(self) -> str:
        """What this rank's gradients actually do: staged only on a Gloo default group."""
        return "staged" if self.mode == "staged" and self.dist.get_backend() == "gloo" else "native"

    def wrap_init(self, original: Any) -> Any:
        @functools.wraps(original)
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            if _importing_main_again():
                _refuse_reimported_main(self)
            arguments = self._arguments(original, args, kwargs, host_store=True)
            if os.environ.get("RANK") is not None:  # args and env style: the rank is known before the call
                self._say_swap(os.environ["RANK"] == "0")
            self.emitter.emit(protocol.RANK_MEETING, pid=os.getpid(), source="rank helper",
                              **_own_store_file(original, arguments, args, kwargs))
            result = original(**arguments) if arguments is not None else original(*args, **kwargs)
            if str(self.dist.get_backend()) == "gloo":
                from ddpstudio.rank.gloo_exit import settle_at_exit

                settle_at_exit()  # no abort at exit after a last all-reduce (rank/gloo_exit.py)
            _hook_ddp(self)
            self._say_swap(self.dist.get_rank() == 0)  # spawn style: the rank is known only now
            self._joined()
            _beat(self.dist)
            _observe(self.emitter, self.dist.get_world_size())
            return result

        return init_process_group

    def wrap_new_group(self, original: Any) -> Any:
        @functools.wraps(original)
        def new_group(*args: Any, **kwargs: Any) -> Any:
            arguments = self._arguments(original, args, kwargs, host_store=False)
            return original(**arguments) if arguments is not None else original(*args, **kwargs)

        return new_group

    def _arguments(self, original: Any, args: tuple, kwargs: dict, host_store: bool) -> dict[str, Any] | None:
        """The call's arguments by name, changed where the helper must: the host's store (no libuv) in place
        of torch's agent-store rendezvous (:mod:`ddpstudio.rank.hoststore`), Gloo for an NCCL that is not
        there (:mod:`ddpstudio.rank.ncclswap`); None to make the call as the script wrote it."""
        import inspect

        from ddpstudio.rank import ncclswap

        try:
            bound = dict(inspect.signature(original).bind(*args, **kwargs).arguments)
        except (TypeError, ValueError):
            return None  # torch says what is wrong with the call
        changed = bound
        if host_store:
            from ddpstudio.rank.hoststore import with_host_store

            changed = with_host_store(bound)
        gloo = ncclswap.gloo_for(changed.get("backend"))
        if gloo is not None and ncclswap.missing(self.dist) is not None:
            self.asked_backend = self.asked_backend or str(changed["backend"])
            changed = {**changed, "backend": gloo}
        return changed if changed is not bound else None

    def _say_swap(self, first_rank: bool) -> None:
        """Once, on the first rank: the script asked for NCCL and gets Gloo (a warning event and a log line)."""
        from ddpstudio.rank import ncclswap

        if self.asked_backend is None or self.swap_said:
            return
        self.swap_said = True
        why = ncclswap.missing(self.dist)
        if first_rank and why is not None:
            _warn(self, ncclswap.message(why))

    def wrap_destroy(self, original: Any) -> Any:
        @functools.wraps(original)
        def destroy_process_group(group: Any = None) -> Any:
            whole = group is None and self.dist.is_initialized()
            rank = self.dist.get_rank() if whole else None
            if whole:
                _flush_losses()
            result = original(group)
            if whole:
                self.emitter.emit(protocol.RANK_LEFT, rank=rank, pid=os.getpid())
            return result

        return destroy_process_group

    def wrap_all_reduce(self, original: Any) -> Any:
        @functools.wraps(original)
        def all_reduce(tensor: Any, op: Any = None, group: Any = None, async_op: bool = False) -> Any:
            from ddpstudio.rank import staged  # imports torch: only once the script calls this

            op = self.dist.ReduceOp.SUM if op is None else op
            return staged.all_reduce(tensor, self.mode, op, group, async_op, reduce=original)

        return all_reduce

    def _joined(self) -> None:
        import torch

        dist = self.dist
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            device = f"cuda:{torch.cuda.current_device()}"
        else:
            device = "cuda" if torch.cuda.is_available() else "cpu"  # not touched yet: index unknown
        self.emitter.rank = dist.get_rank()
        asked = {"asked_backend": self.asked_backend} if self.asked_backend else {}
        self.emitter.emit(protocol.RANK_JOINED, pid=os.getpid(), world_size=dist.get_world_size(),
                          backend=str(dist.get_backend()), device=device, grad_exchange=self.running_mode(),
                          grad_compression=self.compression, source="rank helper", **asked)


def _beat(dist: ModuleType) -> None:
    """The script's step and phase for the launcher's hang watch (:mod:`ddpstudio.rank.scriptbeat`)."""
    try:
        from ddpstudio.rank import scriptbeat

        scriptbeat.install(dist)
    except Exception as exc:  # the run goes on; only a hang would go unnamed
        print(f"ddpstudio rank helper: no heartbeat (a stuck rank will not be named): {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)


def _observe(emitter: Emitter, world_size: int) -> None:
    """The script's steps, the losses of their backward passes, their samples (:mod:`ddpstudio.rank.stepwatch`)."""
    try:
        from ddpstudio.rank import stepwatch

        stepwatch.install(emitter, world_size)
    except Exception as exc:  # the run goes on; its curve is then what the script prints
        print(f"ddpstudio rank helper: steps and losses are read from the script's output only: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def _flush_losses() -> None:
    try:
        from ddpstudio.rank import stepwatch

        stepwatch.flush()
    except Exception as exc:  # noqa: BLE001 - never in the way of the script's own ending
        print(f"ddpstudio rank helper: the last steps' losses were not reported: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)


# A rank's process that runs the script's top level again while it starts: said as the root cause.
REIMPORTED_MAIN = (
    "init_process_group was called again in a process the rank started (a DataLoader worker, or a process of "
    "the script's own), while that process was importing your script: a process started by spawning (always on "
    "Windows; elsewhere with multiprocessing_context=\"spawn\") runs the script's top level again. Put the "
    "training code under if __name__ == \"__main__\": (a main() called from there), or set the DataLoader's "
    "num_workers=0")


def _importing_main_again() -> bool:
    """Is this process a spawned child still importing the parent's main module (``multiprocessing.spawn``'s
    ``prepare``, which sets ``_inheriting`` until the child's own target runs; a spawned rank's
    ``init_process_group`` runs later, in its target)?"""
    mp = sys.modules.get("multiprocessing.process")
    try:
        return mp is not None and bool(getattr(mp.current_process(), "_inheriting", False))
    except Exception:  # noqa: BLE001 - a private attribute: never let looking at it break the call
        return False


def _refuse_reimported_main(state: _State) -> None:
    """Instead of a second process group (EADDRINUSE, or a hang in the store): the rank's error, stated."""
    state.emitter.emit(protocol.ERROR, message=REIMPORTED_MAIN, stated=True, pid=os.getpid())
    raise RuntimeError(REIMPORTED_MAIN)


def _own_store_file(original: Any, arguments: dict[str, Any] | None, args: tuple, kwargs: dict) -> dict[str, Any]:
    """``store_file`` (with ``store_file_mtime`` and ``store_file_bytes``: None and 0 when it does not exist
    yet) when the call meets on a FileStore (``init_method="file://..."``): the launcher records a path the
    script names, and says when it was there before the run began (a killed run's leftover: pytorch #55967)."""
    import inspect

    if arguments is None:
        try:
            arguments = dict(inspect.signature(original).bind(*args, **kwargs).arguments)
        except (TypeError, ValueError):
            return {}
    url = arguments.get("init_method")
    if not isinstance(url, str) or not url.lower().startswith("file:"):
        return {}
    from ddpstudio.core.platform import LINUX, WINDOWS
    from ddpstudio.core.rendezvous.storeurl import store_path_from_url

    try:  # the path as this process's torch reads it: its own OS, whatever a test's platform seam says
        path = os.path.abspath(store_path_from_url(url, WINDOWS if sys.platform == "win32" else LINUX))
    except ValueError:
        return {}  # torch says what is wrong with it
    try:
        found = os.stat(path)
    except OSError:
        return {"store_file": path, "store_file_mtime": None, "store_file_bytes": 0}
    return {"store_file": path, "store_file_mtime": found.st_mtime, "store_file_bytes": found.st_size}


def _hook_ddp(state: _State) -> None:
    """Every DDP on a Gloo group gets the exchange's hook at its first forward (once torch is whole).

    At the first forward, not in ``__init__``: a script that registers its own
    hook after building the model keeps it (DDP takes one hook only).
    """
    if state.mode != "staged" and state.compression != "fp16":
        return
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddpstudio.rank.staged import register

    if getattr(DDP, MARK, False):
        return
    DDP.__init__ = _wrap_ddp_init(DDP.__init__, state, register)
    setattr(DDP, MARK, True)


def _wrap_ddp_init(original: Any, state: _State, register: Any) -> Any:
    @functools.wraps(original)
    def __init__(model: Any, *args: Any, **kwargs: Any) -> None:
        original(model, *args, **kwargs)
        if state.dist.get_backend(model.process_group) != "gloo":
            return
        _warn_used_map(state, model)
        handle = None

        def first_forward(module: Any, _inputs: Any) -> None:
            handle.remove()
            _warn_used_map(state, module)  # static_graph may have been set since, by _set_static_graph()
            if module._comm_hooks:
                _warn(state, "the script registered its own DDP communication hook; DDP Studio's is not added")
                return
            try:
                register(module, state.mode, state.compression, module.process_group)
            except RuntimeError as exc:  # a built-in hook registered by the script
                _warn(state, f"DDP Studio's communication hook was not added: {exc}")

        handle = model.register_forward_pre_hook(first_forward)

    return __init__


def _warn_used_map(state: _State, model: Any) -> None:
    """Once per model, before its first backward: DDP's own all-reduce that the staged exchange cannot reach."""
    from ddpstudio.rank.usedmap import unreachable_all_reduce

    if getattr(model, WARNED, False):
        return
    message = unreachable_all_reduce(model, state.mode)
    if message:
        setattr(model, WARNED, True)
        _warn(state, message)


def _warn(state: _State, message: str) -> None:
    state.emitter.emit(protocol.WARNING, message=message)
    print(f"{protocol.HELPER_SAYS}{message}", file=sys.stderr, flush=True)
