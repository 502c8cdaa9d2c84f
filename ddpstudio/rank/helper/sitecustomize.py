"""DDP Studio's rank helper, run by Python at start-up in each rank of a user's script.

The launcher puts this folder (and nothing else: no module of ours may shadow
a user's) first on the ranks' PYTHONPATH; ``site`` imports the first
``sitecustomize`` it finds, so this one runs the one it shadows, then waits.
It imports nothing heavy itself: a finder on ``sys.meta_path`` notices when
the script imports ``torch.distributed`` and only then hands the module to
:mod:`ddpstudio.rank.script_hooks` (rank reports, staged gradient exchange).
A rank that exits without ever importing torch says so at exit
(``rank_no_torch``): it cannot have joined a process group either.
A failure here is printed as one line and never stops the script.
"""

import os
import sys

WATCHED = "torch.distributed"
HOOKS = "ddpstudio.rank.script_hooks"


def _warn(what, exc):
    print(f"ddpstudio rank helper: {what}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def _chain():
    """Run the ``sitecustomize`` this one shadows (a venv's or a distribution's), as ``site`` would."""
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    here = os.path.dirname(os.path.abspath(__file__))
    where = [os.path.abspath(p or os.curdir) for p in sys.path]
    # Only the folders after this one: another sitecustomize that chains the same way (a profiler's,
    # a coverage tool's) and stands before this one has already run and must not be run again, nor
    # run this one again (the two would call each other until RecursionError).
    rest = sys.path[where.index(here) + 1:] if here in where else sys.path
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    try:
        spec.loader.exec_module(module_from_spec(spec))
    except Exception as exc:  # site.py reports its own sitecustomize's errors the same way
        _warn(f"the sitecustomize in {spec.origin} failed", exc)


class _Watch:
    """A meta-path finder that never finds anything: it wraps ``torch.distributed``'s loader once."""

    def find_spec(self, name, path=None, target=None):
        if name != WATCHED:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        original = getattr(loader, "exec_module", None)
        if original is None:
            return spec

        def exec_module(module):
            original(module)
            try:
                __import__(HOOKS)
                sys.modules[HOOKS].install(module)
            except Exception as exc:
                _warn("could not watch torch.distributed (the run continues without it)", exc)

        loader.exec_module = exec_module
        return spec


class _OwnPackage:
    """In a Python of the user's choosing (core/userpython.py): ``ddpstudio`` from DDP Studio's folder, and only
    it, so nothing else there (its torch) comes before the environment's own."""

    def __init__(self, folder):
        self.folder = folder

    def find_spec(self, name, path=None, target=None):
        if name != "ddpstudio":
            return None
        from importlib.machinery import PathFinder

        return PathFinder.find_spec(name, [self.folder])


def _find_own_package():
    folder = os.environ.get("DDPSTUDIO_PACKAGE_DIR")  # core.userpython.PACKAGE_DIR_ENV
    if folder:
        sys.meta_path.insert(0, _OwnPackage(folder))


def _say_no_torch():
    """At exit, when torch was never imported: this rank joined no process group (core/launch/outcome.py)."""
    if WATCHED in sys.modules or "torch" in sys.modules:
        return
    try:
        from ddpstudio.core import protocol
        from ddpstudio.rank.emit import Emitter, rank_from_env
    except ImportError:
        return  # DDP Studio is not importable from this interpreter: nothing is known, nothing is said
    try:
        emitter = Emitter(rank_from_env())
        emitter.emit(protocol.RANK_NO_TORCH, pid=os.getpid(), source="rank helper")
        emitter.close()
    except Exception as exc:
        _warn("could not say that this rank never imported torch", exc)


def _watch_for_torchless_exit():
    if os.environ.get("DDPSTUDIO_EVENTS_DIR"):  # core.protocol.EVENTS_DIR_ENV: a rank of a run
        import atexit

        atexit.register(_say_no_torch)


def _load(name):
    """A module of ``ddpstudio/rank`` loaded from its file alone: no package of ours is imported at start-up."""
    from importlib.util import module_from_spec, spec_from_file_location

    source = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name + ".py")
    spec = spec_from_file_location("_ddpstudio_" + name, source)
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _watch_for_stop():
    """The launcher's polite stop, the run's stop file: KeyboardInterrupt here, as Ctrl+C would (Windows)."""
    path = os.environ.get("DDPSTUDIO_STOP_FILE")  # core.protocol.STOP_FILE_ENV
    if not path:
        return
    try:
        stopwatch = _load("stopwatch")
        stopwatch.watch(path)
        stopwatch.end_promptly_when_interrupted()
    except Exception as exc:
        _warn("could not watch for the stop file (a stop ends this rank the hard way)", exc)


def _spawned_rank():
    """Spawn style: a process the script started writes to output files of its own (rank/spawnchild.py)."""
    if not os.environ.get("DDPSTUDIO_SPAWN_LOGS"):  # rank/spawnchild.py LOGS_ENV
        return
    try:
        _load("spawnchild").setup()
    except Exception as exc:
        _warn("could not give this spawned process its own log (its output goes to the script's)", exc)


def _watch_launcher():
    """Die with the launcher, with every process this rank started (POSIX; Windows: the Job Object).

    The kernel's parent-death signal kills the rank alone; the lifeline kills its process group.
    """
    if not os.environ.get("DDPSTUDIO_LIFELINE_FD"):  # core.protocol.LIFELINE_FD_ENV
        return
    try:
        _load("lifeline").watch_launcher()
    except Exception as exc:
        _warn("could not watch the launcher (the parent-death signal still ends this rank)", exc)


_find_own_package()
_chain()
_spawned_rank()
_watch_for_stop()
_watch_launcher()
_watch_for_torchless_exit()
if WATCHED in sys.modules:  # imported by the chained sitecustomize: too late to watch, hook it now
    try:
        __import__(HOOKS)
        sys.modules[HOOKS].install(sys.modules[WATCHED])
    except Exception as exc:
        _warn("could not hook torch.distributed", exc)
else:
    sys.meta_path.insert(0, _Watch())
