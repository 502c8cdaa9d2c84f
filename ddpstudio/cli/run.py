"""``ddpstudio run``: validate, plan, launch, and show the run until it ends."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from ddpstudio.cli.progress import SHOW_OUTPUT
from ddpstudio.core import protocol
from ddpstudio.core.batchbalance import BALANCE_CHOICES
from ddpstudio.core.launch.hangwatch import ON_HANG
from ddpstudio.core.plan import DEFAULT_DIST_ARGS, DEFAULT_SPAWN_ARGS, LR_SCHEDULES, RecipeSpec, ScriptSpec

SCRIPT_SUFFIXES = (".py", ".pyw")  # a first argument with one of these is the script (positional_script)

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
    what.add_argument("--model", help="torchvision classification model (default resnet18)")
    what.add_argument("--data", metavar="DIR", help="an ImageFolder directory or a folder holding CIFAR-10")
    what.add_argument("--dataset", choices=("synthetic", "folder", "cifar10"),
                      help="data source (default: synthetic, or guessed from --data)")
    what.add_argument("--script", metavar="PATH", help="run your own training script instead (naming it first works too: "
                        "ddpstudio run train.py -- its arguments)")
    what.add_argument("--module", metavar="NAME",
                      help="run your own script as a module of its package, as python -m NAME and torchrun -m "
                           "do: found from the working folder (mypkg.train is mypkg/train.py there). A --script "
                           "that imports relatively or imports its own package runs so by itself; the plan "
                           "says so")
    what.add_argument("--python", metavar="PATH",
                      help="the Python your script's ranks run in: an environment's python (or its folder) that "
                           "has your script's packages and PyTorch; checked before the start. Default: DDP "
                           "Studio's own Python")
    what.add_argument("--script-style", choices=("args", "env", "spawn"),
                      help="args: started once per rank, distributed settings appended as arguments (PyTorch "
                           "examples style); env: torchrun's environment variables; spawn: started once, the "
                           "script starts its own ranks (mp.spawn, --multiprocessing-distributed). Default: "
                           "spawn when the script calls mp.spawn or its arguments contain "
                           "--multiprocessing-distributed; env when it is written for torchrun (reads LOCAL_RANK, "
                           "RANK or WORLD_SIZE, or calls init_process_group without an init_method) and parses no "
                           "--dist-url, --dist-backend, --world-size or --rank, unless --dist-args is given; else "
                           "args. The choice and its reason are printed")
    what.add_argument("--dist-args", metavar="TEMPLATE",
                      help=f"argument template appended to the script's command in --script-style args (each "
                           f"rank; default: {DEFAULT_DIST_ARGS!r}) and spawn (once; default: "
                           f"{DEFAULT_SPAWN_ARGS!r}). Fields: {{url}} the store's init URL, {{backend}}, "
                           "{world_size}, {rank}, {local_rank} (the rank on this machine), {gpu} (the CUDA device "
                           "index the rank should use: its local rank, or 0 with --one-gpu-per-rank; GPU runs "
                           "only), {port} and {addr} (the TCP store's). A template that says env:// gets "
                           "MASTER_ADDR, MASTER_PORT (a free port), RANK, WORLD_SIZE and LOCAL_RANK in every store "
                           "setting. Where your own arguments also set --dist-url, --dist-backend, --world-size "
                           "or --rank, the template's value wins (it comes last and matches the store this run "
                           "made) and a warning names both; leave a flag out of the template to keep yours")
    what.add_argument("--one-gpu-per-rank", action="store_true",
                      help="for scripts that always use cuda:0: each rank sees only its own GPU "
                           "(CUDA_VISIBLE_DEVICES set per rank), so cuda:0 is a different GPU on each rank and "
                           "{gpu} is 0; needs CUDA GPUs")
    train = p.add_argument_group("training")
    train.add_argument("--epochs", type=int, help="default 1")
    train.add_argument("--max-steps", type=int, help="stop after this many steps")
    train.add_argument("--batch-size", type=int, help="batch size per rank (see --batch-mode; default 32)")
    train.add_argument("--batch-mode", choices=("per-rank", "split"),
                       help="per-rank: each rank takes --batch-size (effective batch = ranks x batch); "
                            "split: --batch-size is the effective batch, divided over the ranks (default per-rank)")
    train.add_argument("--accumulate", type=int, metavar="N",
                       help="gradient accumulation: N micro-batches of --batch-size per optimizer step, gradients "
                            "exchanged on the last only (effective batch = ranks x batch x N; steps count optimizer "
                            "steps; default 1). Your own script accumulates by itself: this is for the built-in recipe")
    train.add_argument("--balance", choices=BALANCE_CHOICES,
                       help="per-rank batches for mixed GPUs: measured sizes each rank's batch for its speed after "
                            "its first passes, keeping the global batch (ranks x --batch-size) and weighting the "
                            "gradients by each share, so training equals equal batches of that size; equal "
                            "gives every rank --batch-size; auto (default) measures only when the GPUs differ")
    train.add_argument("--lr", type=float, help="default 0.02")
    train.add_argument("--scale-lr", action="store_true",
                       help="multiply the learning rate by the world size x --accumulate (the effective batch over "
                            "one rank's micro-batch: the linear scaling rule)")
    train.add_argument("--lr-schedule", choices=LR_SCHEDULES,
                       help="constant (default); step (x0.1 at 50%% and 75%% of the steps); cosine (decays to 0)")
    train.add_argument("--warmup-steps", type=int, help="linear learning-rate warm-up (default 0)")
    train.add_argument("--eval-every", type=int, metavar="N",
                       help="also evaluate on the validation split every N steps (always at each epoch's end)")
    train.add_argument("--image-size", type=int, help="default 32")
    train.add_argument("--synthetic-samples", type=int, metavar="N",
                       help=f"images in one epoch of the synthetic data (default {RecipeSpec.synthetic_samples}): "
                            "more for a longer steady stretch when timing a machine")
    train.add_argument("--workers", type=int,
                       help="DataLoader worker processes per rank (default: chosen for this machine's cores and "
                            "ranks, shown with the plan; 0 loads data in the rank itself; at most what the cores, "
                            "free memory and open-file limit hold, unless --oversubscribe)")
    train.add_argument("--no-amp", action="store_true", help="no mixed precision on CUDA")
    train.add_argument("--checkpoint-dir", metavar="DIR", help="save a checkpoint here after each epoch")
    train.add_argument("--checkpoint-every", type=int, metavar="N",
                       help="also save a checkpoint every N optimizer steps (default: at each epoch's end only)")
    train.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    dist = p.add_argument_group("distributed")
    dist.add_argument("--world-size", type=int,
                      help="number of ranks (default: one per GPU, or per GPU chosen with --gpus; 2 on the CPU)")
    dist.add_argument("--gpus", metavar="LIST",
                      help="the GPUs to train on, one rank each: their numbers as the machine panel and "
                           "'ddpstudio doctor' show them (0,2) or their UUIDs (GPU-...). The ranks see only "
                           "these (CUDA_VISIBLE_DEVICES, set by UUID). Default: every GPU")
    dist.add_argument("--oversubscribe", action="store_true",
                      help="allow more CPU ranks, or --workers, than this machine's cores and free memory hold")
    dist.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    dist.add_argument("--store", choices=("auto", "file", "tcp"), default="auto")
    dist.add_argument("--store-path", metavar="PATH", help="a fixed FileStore path (or file:// URL)")
    dist.add_argument("--port", type=int, help="TCP store port (default: a free one)")
    dist.add_argument("--rendezvous-timeout", type=float, default=120.0, metavar="SECONDS")
    dist.add_argument("--max-restarts", type=int, default=0, metavar="N",
                      help="when a rank dies, stop the others and start the group again, at most N times (default "
                           "0: the run fails). The recipe resumes from its last checkpoint (from step 0 before the "
                           "first); a script starts again, as under torchrun, and resumes itself if it can")
    dist.add_argument("--hang-timeout", type=float, default=45.0, metavar="SECONDS",
                      help="a rank that makes no progress for this long while the others wait is named: which "
                           "rank, which step, doing what, its Python stack in its log (default 45; 0: not "
                           "watched). Raise it for steps, evaluations or checkpoints that take longer")
    dist.add_argument("--on-hang", choices=ON_HANG, default="warn",
                      help="warn: say so and keep waiting (default); stop: end the run as failed")
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
    p.add_argument("--show-output", choices=SHOW_OUTPUT, default="0",
                   help="what your script prints: 0 = rank 0's lines as printed (default; in spawn style also "
                        "the script's own process's), all = every rank's, each line prefixed with [rank N] "
                        "([script] for a spawn-style script's own process), none = only DDP Studio's progress "
                        "(every rank's output is always in the run folder's logs/)")
    p.add_argument("--json", action="store_true",
                   help="print the protocol events (JSON lines) instead: every event, output lines included")
    p.add_argument("script_args", nargs="*", help=argparse.SUPPRESS)
    p.set_defaults(func=main)


def build_request(args: argparse.Namespace):
    from ddpstudio.core.policy import Request

    request = Request(backend=args.backend, world_size=args.world_size, store=args.store,
                      store_path=args.store_path, port=args.port, batch_mode=args.batch_mode or "per-rank",
                      rendezvous_timeout=args.rendezvous_timeout, grad_exchange=args.grad_exchange,
                      grad_compression=args.grad_compression, rank_helper=not args.no_rank_helper,
                      oversubscribe=args.oversubscribe, gpus=gpu_list(args.gpus), max_restarts=args.max_restarts,
                      hang_timeout=args.hang_timeout, on_hang=args.on_hang, balance=args.balance or "auto")
    if args.script is not None:  # "" too: refused as empty, never the recipe instead
        style = args.script_style or chosen_style(args.script, list(args.script_args), args.dist_args is not None)
        template = args.dist_args if args.dist_args is not None else (
            DEFAULT_SPAWN_ARGS if style == "spawn" else DEFAULT_DIST_ARGS)  # "" is a template too: nothing added
        request.script = ScriptSpec(path=args.script, args=list(args.script_args), style=style, dist_args=template,
                                    one_gpu_per_rank=args.one_gpu_per_rank, module=getattr(args, "module", None),
                                    python=getattr(args, "python", None),
                                    # The folder the command ran in, as python train.py would: recorded, so a run
                                    # opened again in the window runs there too, not in the script's folder.
                                    cwd=os.getcwd())
        return request
    # Options left out are None (so that cli/runconflicts.py sees what was typed): RecipeSpec's defaults.
    dataset = args.dataset or ("synthetic" if args.data is None else _guess_dataset(args.data))
    max_steps = args.max_steps if args.max_steps is not None else (DEMO_STEPS if args.demo else None)
    typed = {name: getattr(args, name) for name in ("model", "epochs", "batch_size", "accumulate", "lr",
                                                    "image_size", "lr_schedule", "warmup_steps",
                                                    "synthetic_samples")}
    request.recipe = RecipeSpec(
        data=dataset, data_dir=args.data, max_steps=max_steps, scale_lr=args.scale_lr, workers=args.workers,
        amp=not args.no_amp, checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
        resume=args.resume, eval_every=args.eval_every,
        **{name: value for name, value in typed.items() if value is not None})
    return request


def module_as_script(args: argparse.Namespace) -> str | None:
    """``--module NAME``: ``args.script`` becomes the file it names in the working folder (the rest of the
    command line treats it as a script, run with ``-m``); the problem in words when it cannot."""
    name = getattr(args, "module", None)
    if name is None:
        return None
    if args.script is not None or getattr(args, "demo", False):
        return f"--module runs your package's module and {'--demo' if args.script is None else '--script'} " \
               "something else: give one of them"
    from ddpstudio.core.scriptmodule import module_file

    try:
        args.script = module_file(name, os.getcwd())
    except ValueError as exc:
        return str(exc)
    return None


def positional_script(args: argparse.Namespace) -> str | None:
    """``ddpstudio run train.py -- --lr 0.1``: a first argument that names a Python file is the script, as it is for
    python and torchrun; the problem in words when the arguments name none."""
    if not args.script_args or args.script:
        return None
    first = args.script_args[0]
    if os.path.splitext(first)[1].lower() in SCRIPT_SUFFIXES:
        args.script, args.script_args = first, args.script_args[1:]
        return None
    return (f"unexpected arguments {' '.join(args.script_args)!r}: a script is given with --script, its own "
            f"arguments after -- (ddpstudio {getattr(args, 'command', None) or 'run'} --script train.py -- --lr 0.1)")


def gpu_list(raw: str | None) -> tuple[str, ...] | None:
    """``--gpus 0, 2`` as its items; the policy says what is wrong with one (core/gpu/selection.py)."""
    if raw is None:
        return None
    return tuple(item.strip() for item in raw.split(",")) if raw.strip() else ()


def chosen_style(script: str, script_args: list[str], template_given: bool = False) -> str:
    """No --script-style given: spawn when the script starts its own ranks, env when it is written for torchrun
    (unless a --dist-args template was given: that is for args style), else args; said on stderr, with the
    reason (core/scriptstyle.py)."""
    from ddpstudio.core.scriptstyle import StyleSuggestion, args_style_why, read_source, suggest_style

    source = read_source(script)
    if source is None:
        return "args"  # cannot be read: the plan's checks say why, and a style line before that would mislead
    suggestion = suggest_style(source, script_args, script)
    if suggestion is None or (suggestion.style == "env" and template_given):
        suggestion = StyleSuggestion("args", args_style_why(source, template_given))
    others = " or ".join(s for s in ("args", "spawn", "env") if s != suggestion.style)
    print(f"ddpstudio: script style {suggestion.style}: {suggestion.why} (--script-style {others} overrides)",
          file=sys.stderr)
    return suggestion.style


def _guess_dataset(data_dir: str) -> str:
    from pathlib import Path

    from ddpstudio.core.plan import CIFAR_FOLDER

    path = Path(data_dir)
    try:
        return "cifar10" if path.name == CIFAR_FOLDER or (path / CIFAR_FOLDER).is_dir() else "folder"
    except OSError:  # an unreadable folder: validation names it (core/validate.py check_data_dir)
        return "folder"


def fail(message: str) -> int:
    print(f"ddpstudio: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def plan_or_problems(args: argparse.Namespace, platform, elsewhere: frozenset[str] = frozenset()):
    """The request checked and planned: a Plan, or the problems in words (one sentence each).
    ``elsewhere``: fields whose checks are about this machine's files and ports, not the machines the run
    will go to (``export-job`` and the window's Copy as: the data and script live on the cluster)."""
    from ddpstudio.core.gpu.cudadriver import planning_machine
    from ddpstudio.core.policy import PolicyError, build_plan
    from ddpstudio.core.validate import check_request

    from ddpstudio.cli.runconflicts import conflict

    contradiction = conflict(args, DEMO_STEPS)
    if contradiction:
        return [contradiction]
    request = build_request(args)
    problems = [p.message for p in check_request(request) if p.field not in elsewhere]
    if problems:
        return problems
    try:
        plan = build_plan(request, platform, planning_machine())  # torch only where a GPU can be
    except (PolicyError, ValueError) as exc:
        return [str(exc)]
    from ddpstudio.core.recipefit import check_plan

    found = check_plan(plan, request.oversubscribe, elsewhere)  # what the ranks would find out too late
    return [p.message for p in found] if found else plan


def plan_or_exit(args: argparse.Namespace, platform, elsewhere: frozenset[str] = frozenset()):
    """A Plan, or the exit status after one error line per problem (``plan_or_problems``)."""
    found = plan_or_problems(args, platform, elsewhere)
    if not isinstance(found, list):
        return found
    for message in found:
        print(f"ddpstudio: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def main(args: argparse.Namespace) -> int:
    from ddpstudio.core.platform import current

    module_problem = module_as_script(args)
    if module_problem:
        return fail(module_problem)
    script_problem = positional_script(args)
    if script_problem:
        return fail(script_problem)
    if args.one_gpu_per_rank and not args.script:
        return fail("--one-gpu-per-rank is for your own script (--script): the built-in recipe already gives "
                    "each rank its own GPU")
    plan = plan_or_exit(args, current())
    if isinstance(plan, int):
        return plan
    if plan.script is not None:
        from ddpstudio.core.cleanup.hygiene import prelaunch_script_stores

        check = prelaunch_script_stores(plan.script.path)  # its own FileStore, left by a killed run of ours
        if not check.ok:
            return fail(check.message)
        if check.message:
            print(f"ddpstudio: {check.message}", file=sys.stderr)
    if plan.store_path and plan.store_is_fixed:
        return _on_claimed_path(plan, args)
    return _launch(plan, args)


def _on_claimed_path(plan, args: argparse.Namespace, launch=None) -> int:
    """A fixed store path: claim it (one run at a time), clean up after earlier runs there, then launch
    (``launch()``: how, when not ``_launch``; 'ddpstudio host --store-path' starts its node launcher)."""
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
        return launch() if launch is not None else _launch(plan, args)
    finally:
        with contextlib.suppress(OSError):
            claim.release(plan.store_path, plan.run_id)  # ours, or a dead launcher's; a live one keeps it


def _launch(plan, args: argparse.Namespace, session=None) -> int:
    """Start the launcher (or ``session``'s: the node launcher of 'ddpstudio host/join') and show the run."""
    from ddpstudio.cli.main import interrupted_earlier
    from ddpstudio.cli.progress import ProgressView
    from ddpstudio.core.launch.aftermath import ranks_after_launcher_death
    from ddpstudio.core.launch.session import Session

    if interrupted_earlier():
        # Ctrl+C during planning that a library swallowed (torch's import can: 1 in 16 tries at 0.4-0.6 s
        # went unnoticed and the run trained on): the user asked to stop, so nothing starts.
        raise KeyboardInterrupt
    session = session or Session(plan)
    view = ProgressView(show_output=getattr(args, "show_output", "0")) if not args.json else None
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
        # A batch per read of the launcher's stream, one flush each (issue 20: per-line CPU is the ranks').
        for batch in session.batches(unread=view.unread if view is not None else frozenset()):
            if view is not None:
                view.feed_all(batch)
            else:
                sys.stdout.write("".join(event.to_line() + "\n" for event in batch))
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
