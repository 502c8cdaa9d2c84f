"""The ``ddpstudio run ...`` line that does what the window's setup does ("Copy as command").

Only what differs from the CLI's defaults is written, so the line stays
short. The script arguments are split, and the line quoted, by the platform's
rules (core/cmdline.py: the C runtime's and cmd.exe's on Windows, POSIX
``shlex`` elsewhere). A script's working folder (the one typed, or the
window's default: the script's folder), which the CLI has no flag for,
becomes a leading ``cd``.
"""

from __future__ import annotations

from ddpstudio.core import cmdline
from ddpstudio.core.plan import DEFAULT_DIST_ARGS, DEFAULT_SPAWN_ARGS, RecipeSpec
from ddpstudio.core.platform import Platform, current
from ddpstudio.core.scriptstyle import read_source, suggest_style
from ddpstudio.gui.form_state import SetupState


def _cli_would_guess_other(s: SetupState, platform: Platform | None) -> bool:
    """Without --script-style the CLI picks spawn or env for such a script: an args choice must then be said."""
    try:
        script_args = cmdline.split(s.script_args, platform)
    except ValueError:
        script_args = []
    suggestion = suggest_style(read_source(s.script_path.strip()), script_args, s.script_path.strip())
    return suggestion is not None and suggestion.style != "args"


def run_arguments(s: SetupState, platform: Platform | None = None) -> list[str]:
    """The arguments after ``ddpstudio run``; the script's own split by ``platform``'s rules."""
    args: list[str] = []

    def flag(name: str, value, default=None) -> None:
        if value not in (None, "", default):
            args.extend([name, str(value)])

    if s.is_script:
        args += ["--script", s.script_path.strip()]
        if s.script_style != "args" or _cli_would_guess_other(s, platform):
            args += ["--script-style", s.script_style]
        if s.script_style != "env":
            flag("--dist-args", s.dist_args, DEFAULT_SPAWN_ARGS if s.script_style == "spawn" else DEFAULT_DIST_ARGS)
        if s.one_gpu_per_rank:
            args.append("--one-gpu-per-rank")
        flag("--python", s.script_python.strip())
    else:
        flag("--model", s.model.strip(), RecipeSpec.model)
        flag("--dataset", s.data, "synthetic")
        if s.data != "synthetic":
            flag("--data", s.data_dir.strip())
        flag("--image-size", s.image_size, RecipeSpec.image_size)
        flag("--epochs", s.epochs, RecipeSpec.epochs)
        flag("--max-steps", s.max_steps, 0)
        flag("--batch-size", s.batch_size, RecipeSpec.batch_size)
        flag("--batch-mode", s.batch_mode, "per-rank")
        flag("--accumulate", s.accumulate, RecipeSpec.accumulate)
        flag("--balance", s.balance, SetupState.balance)
        flag("--lr", f"{s.lr:g}", f"{RecipeSpec.lr:g}")
        if s.scale_lr:
            args.append("--scale-lr")
        flag("--lr-schedule", s.lr_schedule, RecipeSpec.lr_schedule)
        flag("--warmup-steps", s.warmup_steps, 0)
        flag("--eval-every", s.eval_every, 0)
        flag("--workers", s.workers, -1)
        flag("--checkpoint-dir", s.checkpoint_dir.strip())
        flag("--checkpoint-every", s.checkpoint_every, 0)
        if s.resume:
            args.append("--resume")
    if s.script_style != "spawn" or not s.is_script:
        flag("--world-size", s.world_size, 0)
    flag("--gpus", ",".join(s.gpus))  # UUIDs: the same cards wherever CUDA's order puts them
    if s.keep_training:
        flag("--max-restarts", s.max_restarts, 0)
    flag("--hang-timeout", s.hang_timeout, SetupState.hang_timeout)
    if s.hang_timeout:  # 0: nothing is watched, so nothing to do on a hang
        flag("--on-hang", s.on_hang, SetupState.on_hang)
    flag("--backend", s.backend, "auto")
    if s.store == "fixed":
        args += ["--store", "file"]
        flag("--store-path", s.store_path.strip())
    elif s.store == "tcp":
        args += ["--store", "tcp"]
        flag("--port", s.port, 0)
    if s.is_script and s.script_args.strip():
        args += ["--", *cmdline.split(s.script_args, platform)]
    return args


def command_line(s: SetupState, platform: Platform | None = None) -> str:
    """The whole line for the clipboard (a console's: cmd.exe on Windows); raises ValueError when the
    script arguments cannot be split."""
    platform = platform or current()
    line = cmdline.shell_line(["ddpstudio", "run", *run_arguments(s, platform)], platform)
    folder = s.working_folder() if s.is_script else None
    if folder:
        cd = ["cd", "/d"] if platform.is_windows else ["cd"]
        line = f"{cmdline.shell_line([*cd, folder], platform)} && {line}"
    return line
