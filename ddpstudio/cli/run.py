"""``ddpstudio run``: validate, plan, launch, and show the run until it ends."""

from __future__ import annotations

import argparse
import signal
import sys

from ddpstudio.core import protocol
from ddpstudio.core.plan import DEFAULT_DIST_ARGS, LR_SCHEDULES, RecipeSpec, ScriptSpec

EXIT_BAD_INPUT = 2
DEMO_STEPS = 40
EXIT_HELP = ("exit status: 0 finished, 1 failed, 2 bad input (nothing started), 3 stopped, "
             "4 finished, but nothing trained (a script's ranks joined and exited 0 without a training step), "
             "5 not a distributed script (torch imported, no rank called init_process_group)")


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="train with DDP: the built-in recipe or your script",
                       description="Train with DDP. Script arguments go after '--'.",
                       epilog=EXIT_HELP)
    p.add_argument("--demo", action="store_true",
                   help=f"the built-in demo: resnet18 on synthetic data, {DEMO_STEPS} steps (no data, no GPU needed)")
    what = p.add_argument_group("what to train")
    what.add_argument("--model", default="resnet18", help="torchvision classification model (default resnet18)")
    what.add_argument("--data", metavar="DIR", help="an ImageFolder directory or a folder holding CIFAR-10")
    what.add_argument("--dataset", choices=("synthetic", "folder", "cifar10"),
                      help="data source (default: synthetic, or guessed from --data)")
    what.add_argument("--script", metavar="PATH", help="run your own training script instead")
    what.add_argument("--script-style", choices=("args", "env"), default="args",
                      help="args: distributed settings appended as arguments (PyTorch examples style); "
                           "env: torchrun's environment variables")
    what.add_argument("--dist-args", metavar="TEMPLATE", default=DEFAULT_DIST_ARGS,
                      help=f"argument template for --script-style args (default: {DEFAULT_DIST_ARGS!r})")
    train = p.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=1)
    train.add_argument("--max-steps", type=int, help="stop after this many steps")
    train.add_argument("--batch-size", type=int, default=32, help="batch size per rank (see --batch-mode)")
    train.add_argument("--batch-mode", choices=("per-rank", "split"), default="per-rank",
                       help="per-rank: each rank takes --batch-size (effective batch = ranks x batch); "
                            "split: --batch-size is the effective batch, divided over the ranks")
    train.add_argument("--lr", type=float, default=0.02)
    train.add_argument("--scale-lr", action="store_true", help="multiply the learning rate by the world size")
    train.add_argument("--lr-schedule", choices=LR_SCHEDULES, default="constant",
                       help="constant; step (x0.1 at 50%% and 75%% of the steps); cosine (decays to 0)")
    train.add_argument("--warmup-steps", type=int, default=0, help="linear learning-rate warm-up (default 0)")
    train.add_argument("--eval-every", type=int, metavar="N",
                       help="also evaluate on the validation split every N steps (always at each epoch's end)")
    train.add_argument("--image-size", type=int, default=32)
    train.add_argument("--workers", type=int, default=0, help="DataLoader worker processes per rank")
    train.add_argument("--no-amp", action="store_true", help="no mixed precision on CUDA")
    train.add_argument("--checkpoint-dir", metavar="DIR", help="save a checkpoint here after each epoch")
    train.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    dist = p.add_argument_group("distributed")
    dist.add_argument("--world-size", type=int, help="number of ranks (default: one per GPU; 2 on the CPU)")
    dist.add_argument("--oversubscribe", action="store_true",
                      help="allow more CPU ranks than this machine's cores and free memory hold")
    dist.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    dist.add_argument("--store", choices=("auto", "file", "tcp"), default="auto")
    dist.add_argument("--store-path", metavar="PATH", help="a fixed FileStore path (or file:// URL)")
    dist.add_argument("--port", type=int, help="TCP store port (default: a free one)")
    dist.add_argument("--rendezvous-timeout", type=float, default=120.0, metavar="SECONDS")
    # No argparse choices: an unknown value gets the one-line "ddpstudio: error:" from the policy.
    dist.add_argument("--grad-exchange", default="auto", metavar="auto|native|staged",
                      help="how gradients travel: native (on their device), staged (through CPU memory, for "
                           "Gloo on CUDA: pytorch #186535), auto (staged when Gloo would all-reduce CUDA "
                           "tensors and the check has not shown that to work)")
    dist.add_argument("--grad-compression", default="none", metavar="none|fp16",
                      help="fp16: gradients travel as float16, half the bytes (approximate)")
    dist.add_argument("--no-rank-helper", action="store_true",
                      help="scripts: do not put DDP Studio's start-up helper on the ranks' import path "
                           "(no rank reports, no staged exchange)")
    p.add_argument("--json", action="store_true", help="print the protocol events (JSON lines) instead")
    p.add_argument("script_args", nargs="*", help=argparse.SUPPRESS)
    p.set_defaults(func=main)


def build_request(args: argparse.Namespace):
    from ddpstudio.core.policy import Request

    request = Request(backend=args.backend, world_size=args.world_size, store=args.store,
                      store_path=args.store_path, port=args.port, batch_mode=args.batch_mode,
                      rendezvous_timeout=args.rendezvous_timeout, grad_exchange=args.grad_exchange,
                      grad_compression=args.grad_compression, rank_helper=not args.no_rank_helper,
                      oversubscribe=args.oversubscribe)
    if args.script:
        request.script = ScriptSpec(path=args.script, args=list(args.script_args), style=args.script_style,
                                    dist_args=args.dist_args)
        return request
    dataset = args.dataset or ("synthetic" if not args.data else _guess_dataset(args.data))
    max_steps = args.max_steps if args.max_steps is not None else (DEMO_STEPS if args.demo else None)
    request.recipe = RecipeSpec(
        model=args.model, data=dataset, data_dir=args.data, epochs=args.epochs, max_steps=max_steps,
        batch_size=args.batch_size, lr=args.lr, scale_lr=args.scale_lr, image_size=args.image_size,
        workers=args.workers, amp=not args.no_amp, checkpoint_dir=args.checkpoint_dir, resume=args.resume,
        lr_schedule=args.lr_schedule, warmup_steps=args.warmup_steps, eval_every=args.eval_every)
    return request


def _guess_dataset(data_dir: str) -> str:
    from pathlib import Path

    from ddpstudio.core.plan import CIFAR_FOLDER

    path = Path(data_dir)
    return "cifar10" if path.name == CIFAR_FOLDER or (path / CIFAR_FOLDER).is_dir() else "folder"


def fail(message: str) -> int:
    print(f"ddpstudio: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def main(args: argparse.Namespace) -> int:
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.platform import current
    from ddpstudio.core.policy import PolicyError, build_plan
    from ddpstudio.core.validate import check_request

    if args.script_args and not args.script:
        return fail(f"unexpected arguments {' '.join(args.script_args)!r}; script arguments need --script")
    request = build_request(args)
    problems = check_request(request)
    if problems:
        for problem in problems:
            print(f"ddpstudio: error: {problem.message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        plan = build_plan(request, current(), detect_inventory())
    except (PolicyError, ValueError) as exc:
        return fail(str(exc))
    if plan.store_path and plan.store_is_fixed:
        return _on_claimed_path(plan, args)
    return _launch(plan, args)


def _on_claimed_path(plan, args: argparse.Namespace) -> int:
    """A fixed store path: claim it (one run at a time), clean up after earlier runs there, then launch."""
    import contextlib

    from ddpstudio.core.cleanup.hygiene import prelaunch_check
    from ddpstudio.core.rendezvous import claim

    try:
        taken_over = claim.acquire(plan.store_path, plan.run_id)
    except (claim.ClaimHeld, claim.ClaimError) as exc:
        return fail(str(exc))
    try:
        if taken_over is not None:
            print(f"ddpstudio: took over the store path's claim from {taken_over.describe()}, "
                  "whose holder is gone", file=sys.stderr)
        check = prelaunch_check(plan.store_path)
        if not check.ok:
            return fail(check.message)
        if check.cleaned or check.killed:
            print(f"ddpstudio: {check.message}", file=sys.stderr)
        return _launch(plan, args)
    finally:
        with contextlib.suppress(OSError):
            claim.release(plan.store_path, plan.run_id)  # ours, or a dead launcher's; a live one keeps it


def _launch(plan, args: argparse.Namespace) -> int:
    from ddpstudio.cli.progress import ProgressView
    from ddpstudio.core.launch.aftermath import ranks_after_launcher_death
    from ddpstudio.core.launch.session import Session

    session = Session(plan)
    view = ProgressView() if not args.json else None
    stopping = False

    def on_interrupt(_signum, _frame):
        nonlocal stopping
        if not stopping:
            stopping = True
            print("\nstopping the run (Ctrl+C again does not speed it up; it takes at most ~10 s)",
                  file=sys.stderr)
            session.stop()

    # Installed before the launcher starts: a Ctrl+C in the first second stops the run the same way.
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        try:
            session.start()
        except OSError as exc:  # the disk filled up or turned read-only since the check
            import shutil

            shutil.rmtree(plan.run_dir, ignore_errors=True)
            return fail(f"cannot start the run in {plan.run_dir}: {exc.strerror or exc}")
        if stopping:
            session.stop()
        for event in session.events():
            if view is not None:
                view.feed(event)
            else:
                sys.stdout.write(event.to_line() + "\n")
                sys.stdout.flush()
    finally:
        # The run is over (or this process is ending): a late Ctrl+C, often the impatient second one,
        # must not turn the run's exit status into a KeyboardInterrupt on the way out.
        signal.signal(signal.SIGINT, signal.SIG_IGN if session.proc is not None else previous)
    code = session.returncode
    if session.final is None:
        print("ddpstudio: error: " + ranks_after_launcher_death(plan.run_id, plan.run_dir, code), file=sys.stderr)
        return 1
    if code == EXIT_BAD_INPUT:  # the launcher refused the plan or the store path: nothing was started
        return EXIT_BAD_INPUT
    return protocol.EXIT_CODES.get(session.state or "", 1)
