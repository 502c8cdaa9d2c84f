"""Options of ``ddpstudio run`` that would be ignored, contradict each other, or are empty: refused, saying
which option wins or what to drop (issue 27: nothing typed is silently replaced by something else).

Only the command line can type these: the window shows the recipe's fields or the script's, never both,
and has no "given but empty". What the window can also get wrong is checked in core/validate.py.
"""

from __future__ import annotations

import argparse

# The recipe's options; their parser defaults are None so that a typed value is told apart (cli/run.py).
RECIPE_ONLY = {"model": "--model", "data": "--data", "dataset": "--dataset", "epochs": "--epochs",
               "max_steps": "--max-steps", "batch_size": "--batch-size", "batch_mode": "--batch-mode", "lr": "--lr",
               "scale_lr": "--scale-lr", "lr_schedule": "--lr-schedule", "warmup_steps": "--warmup-steps",
               "eval_every": "--eval-every", "image_size": "--image-size", "workers": "--workers",
               "no_amp": "--no-amp", "checkpoint_dir": "--checkpoint-dir", "resume": "--resume",
               "accumulate": "--accumulate", "checkpoint_every": "--checkpoint-every",
               "balance": "--balance", "synthetic_samples": "--synthetic-samples"}
SCRIPT_ONLY = {"script_style": "--script-style", "dist_args": "--dist-args", "no_rank_helper": "--no-rank-helper",
               "python": "--python"}
# Path options an unset shell variable empties ("--script $TRAIN"): what to give instead.
PATHS = {"script": "the path of your training script", "python": "your environment's python",
         "data": "the data folder",
         "store_path": "the store file's path", "checkpoint_dir": "the checkpoint folder"}


def _typed(args: argparse.Namespace, options: dict[str, str]) -> list[str]:
    return [flag for dest, flag in options.items() if getattr(args, dest, None) not in (None, False)]


def _listed(flags: list[str]) -> tuple[str, str, str]:
    """("--a and --b", "are", "them") or ("--a", "is", "it")."""
    if len(flags) == 1:
        return flags[0], "is", "it"
    return ", ".join(flags[:-1]) + " and " + flags[-1], "are", "them"


def conflict(args: argparse.Namespace, demo_steps: int) -> str | None:
    """The first contradiction among ``args``, in words, or ``None``."""
    for dest, what in PATHS.items():
        value = getattr(args, dest, None)
        if value is not None and not value.strip():
            flag = "--" + dest.replace("_", "-")
            return f"{flag} is empty (an unset shell variable gives that): give {what}, or leave {flag} out"
    if getattr(args, "demo", False) and args.script is not None:
        return "--demo trains the built-in demo and --script your own script: give one of them"
    if getattr(args, "demo", False) and args.epochs is not None:
        return (f"--demo stops after {demo_steps} steps, inside the first epoch, so --epochs {args.epochs} would "
                "never be reached: leave out --demo to train whole epochs, or give --max-steps with --demo")
    if args.script is not None:
        typed = _typed(args, RECIPE_ONLY)
        if typed:
            flags, are, it = _listed(typed)
            return (f"{flags} {are} for the built-in recipe, and your script (--script) would ignore {it}: leave "
                    f"{it} out, or pass your script's own options after '--'")
        return None
    typed = _typed(args, SCRIPT_ONLY)
    if typed:
        flags, are, it = _listed(typed)
        return f"{flags} {are} for your own script (--script), and the built-in recipe would ignore {it}: leave {it} out"
    if getattr(args, "synthetic_samples", None) is not None and (args.data is not None or args.dataset not in
                                                                 (None, "synthetic")):
        return (f"--synthetic-samples sizes the made-up images, and {args.data or '--dataset ' + args.dataset} "
                "is real data, which has as many samples as it holds: leave out --synthetic-samples")
    if args.data is not None and args.dataset == "synthetic":
        return (f"--dataset synthetic makes up its images and would ignore --data {args.data}: leave out "
                "--dataset to train on the folder, or leave out --data")
    return None
