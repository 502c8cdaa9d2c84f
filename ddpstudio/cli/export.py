"""``ddpstudio export RUN --tensorboard DIR --csv FILE``: a run's curves for TensorBoard or a spreadsheet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="write a run's curves as TensorBoard event files and/or CSV",
                       description="Write every curve a run measured (loss per rank and global, eval metrics, "
                                   "samples/s, load and memory), with steps and wall-clock times.")
    p.add_argument("run", metavar="RUN", help="a run id ('ddpstudio runs' lists them) or a run folder")
    p.add_argument("--tensorboard", metavar="DIR", help="write TensorBoard event files into DIR "
                                                        "(needs the optional 'tensorboard' dependencies)")
    p.add_argument("--csv", metavar="FILE", help="write the series as CSV (metric, key, step, seconds since "
                                                 "start, unix time, value)")
    p.set_defaults(func=main)


def _error(message: str) -> int:
    print(f"ddpstudio: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run_folder(run: str) -> Path | None:
    """A run id under the runs folder, or a path to a run folder; None when neither is one."""
    from ddpstudio.core import paths

    for folder in (paths.runs_dir() / run, Path(run)):
        if (folder / "plan.json").is_file():
            return folder
    return None


def main(args: argparse.Namespace) -> int:
    from ddpstudio.core.metrics import export
    from ddpstudio.core.metrics.history import read_history

    if not args.tensorboard and not args.csv:
        return _error("say where to write: --tensorboard DIR and/or --csv FILE")
    folder = run_folder(args.run)
    if folder is None:
        return _error(f"no run {args.run!r}: give a run id from 'ddpstudio runs' or a run folder")
    from ddpstudio.core.outputfile import file_problem, write_failure
    from ddpstudio.core.validate import writable_problem

    problem = file_problem(args.csv, "the CSV file") if args.csv else None
    board = writable_problem("tensorboard", args.tensorboard, "TensorBoard folder") if args.tensorboard else None
    if problem or board:
        return _error(problem or str(board))
    history = read_history(folder)
    if not history.tracks:
        return _error(f"run {folder.name} measured nothing yet (no history.jsonl or step events in {folder})")
    if args.tensorboard:
        try:
            n = export.write_tensorboard(history, args.tensorboard)
        except export.MissingTensorBoard as exc:
            return _error(str(exc))
        except OSError as exc:
            return _error(write_failure(args.tensorboard, exc))
        print(f"{n} scalars written to {args.tensorboard} (open with: tensorboard --logdir {args.tensorboard})")
    if args.csv:
        try:
            n = export.write_csv(history, args.csv)
        except OSError as exc:
            return _error(write_failure(args.csv, exc))
        print(f"{n} rows written to {args.csv}")
    return 0
