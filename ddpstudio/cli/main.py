"""``ddpstudio``: no arguments opens the window; ``doctor``, ``run``, ... do one job each."""

from __future__ import annotations

import argparse
import errno
import sys

from ddpstudio import __version__


def _parser() -> argparse.ArgumentParser:
    from ddpstudio.cli import doctor, run

    parser = argparse.ArgumentParser(
        prog="ddpstudio", description="Point-and-click PyTorch DDP training. With no command, opens the window.")
    parser.add_argument("--version", action="version", version=f"ddpstudio {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor.add_parser(sub)
    run.add_parser(sub)
    for name in ("clean", "bench", "runs", "export", "exportjob", "host", "join"):
        module = _optional(name)
        if module is not None:
            module.add_parser(sub)
    return parser


def _optional(name: str):
    import importlib

    try:
        return importlib.import_module(f"ddpstudio.cli.{name}")
    except ModuleNotFoundError:
        return None


def gui_main() -> int:
    try:
        from ddpstudio.gui.app import main as app_main
    except ModuleNotFoundError as exc:
        if not exc.name or not exc.name.startswith("ddpstudio.gui"):
            raise
        print("ddpstudio: the window is not part of this version yet; try 'ddpstudio run --demo'", file=sys.stderr)
        return 2
    return app_main()


EXIT_STOPPED = 3
_interrupted = False  # Ctrl+C arrived while the default handling (ours, below) was in place


def _on_ctrl_c(signum, frame) -> None:
    """Python's own SIGINT handling (KeyboardInterrupt), remembering that the user asked to stop."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def interrupted_earlier() -> bool:
    """Whether Ctrl+C came while Python's own handling was in place, even if a library swallowed it."""
    return _interrupted


def take_ctrl_c() -> None:
    """Our Ctrl+C handling where Python's own is in place (not where the caller chose to ignore SIGINT).

    A Ctrl+C can land in code Python cannot raise from: a weakref callback (importlib's module locks have
    one) or a ``__del__``. Python then prints "Exception ignored in ..." with a traceback and goes on; the
    stop itself is kept (``_interrupted``), so that traceback is noise: the unraisable hook drops it, and
    passes every other unraisable exception on (seen in CI: Ctrl+C 0.7 s after start, exit 3 but a traceback).
    """
    import signal

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_ctrl_c)
        previous = sys.unraisablehook

        def quiet_interrupts(unraisable) -> None:
            if not (_interrupted and issubclass(unraisable.exc_type, KeyboardInterrupt)):
                previous(unraisable)

        sys.unraisablehook = quiet_interrupts


def main(argv: list[str] | None = None) -> int:
    """The command line; Ctrl+C before a command has its own handler in place ends it quietly (exit 3).

    Also when the interrupt surfaces as another error: a library whose import it hit can swallow it and
    fail afterwards (seen once at 1.0 s: numpy's extension, half initialised under torch's import, then
    "ImportError: cannot load module more than once per process" and a traceback with exit 1).
    """
    take_ctrl_c()
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return _stopped()
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:
        if _interrupted:
            return _stopped()
        if isinstance(exc, OSError) and exc.errno == errno.EINVAL and _stdout_gone():
            return _reader_gone()  # Windows says EINVAL for a closed pipe at times (cpython #79935, open)
        raise


def _stdout_gone() -> bool:
    """Whether standard output cannot take what it holds: a failed write leaves its bytes buffered, so the
    flush tries the pipe again."""
    try:
        sys.stdout.flush()
        return False
    except (OSError, ValueError, AttributeError):
        return True


def _reader_gone() -> int:
    """``ddpstudio runs --json | head``: the reader closed the pipe. What it did not read is of no one's use; a
    traceback would be noise. Python's own advice (the signal module's notes on SIGPIPE): point stdout at the
    null device, so the flush at exit does not fail again, and end as a command whose output was cut does."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 1


def _stopped() -> int:
    print("\nddpstudio: stopped (Ctrl+C)", file=sys.stderr)
    _exit_now(EXIT_STOPPED)
    return EXIT_STOPPED


def _exit_now(code: int) -> None:
    """Exit with ``code`` even after a caught KeyboardInterrupt.

    CPython 3.11 remembers a KeyboardInterrupt that left code run through
    ``PyRun_*`` (the flag from bpo-1054041, set in ``run_eval_code_obj``) and
    then kills itself with SIGINT at exit, whatever we return; measured here:
    a Ctrl+C during torch's import ended with -2 although we caught it. Every
    ``finally`` has run by now; only stdio needs flushing.
    """
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        return gui_main()
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and extra[0] == "--" and hasattr(args, "script_args"):
        # "ddpstudio run train.py --world-size 2 -- --lr 0.1": argparse takes train.py as the script's arguments
        # and leaves what follows "--" over (one positional list cannot be filled twice): all the script's.
        args.script_args += extra[1:]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}" + (
            f"; a script's own arguments go after -- (ddpstudio {args.command} --script train.py -- --lr 0.1)"
            if hasattr(args, "script_args") else ""))
    if args.command is None:
        parser.print_help()
        return 2
    from ddpstudio.core.paths import data_dir_problem

    problem = data_dir_problem()  # every command reads or writes under it
    if problem:
        print(f"ddpstudio: error: {problem}", file=sys.stderr)
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
