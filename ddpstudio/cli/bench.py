"""``ddpstudio bench``: the blog's 1 / 2 / 4 GPU table for your own machine and model.

Takes the same training options as ``ddpstudio run`` (its parser is reused as
a parent, so the two never drift apart), then runs the training at each world
size for a fixed number of measured steps after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from ddpstudio.cli import run as run_cli
from ddpstudio.core.bench.export import write_csv, write_png

# run's options that a benchmark sets itself: hidden here, and refused if given.
NOT_FOR_BENCH = {"world_size": "--world-sizes", "demo": None, "epochs": "--steps", "max_steps": "--steps",
                 "checkpoint_dir": None, "resume": None, "checkpoint_every": None, "max_restarts": None,
                 "gpus": "CUDA_VISIBLE_DEVICES to hide a GPU (the benchmark runs 1, 2, 4 ... ranks on the first GPUs)"}


def _run_parser() -> argparse.ArgumentParser:
    holder = argparse.ArgumentParser(add_help=False).add_subparsers()
    run_cli.add_parser(holder)
    return holder.choices["run"]


def add_parser(sub) -> None:
    parent = _run_parser()
    p = sub.add_parser(
        "bench", parents=[parent], conflict_handler="resolve",
        help="measure samples/s, speedup and efficiency at 1, 2, 4 ... ranks",
        description="Run the training at each world size for a fixed number of steps (after a warm-up that "
                    "is not counted) and report samples/s, speedup, efficiency and time per epoch. Takes the "
                    "training options of 'ddpstudio run'. Script arguments go after '--'.")
    for action in p._actions:
        if action.dest in NOT_FOR_BENCH:
            action.help = argparse.SUPPRESS
    b = p.add_argument_group("benchmark")
    b.add_argument("--world-sizes", metavar="LIST",
                   help="comma-separated world sizes (default: 1,2,4 ... up to the GPU count; 1,2 on the CPU)")
    b.add_argument("--steps", type=int, default=20, help="measured steps per world size (default 20)")
    b.add_argument("--warmup", type=int, default=5, help="steps run first and not counted (default 5)")
    b.add_argument("--compare", action="append", choices=("backend", "store", "batch", "exchange"), default=[],
                   help="also run with one choice flipped: backend (Gloo vs NCCL), store (FileStore vs TCP), "
                        "batch (constant per-rank vs split batch), exchange (native vs staged vs staged + fp16 "
                        "gradient exchange); may be repeated")
    b.add_argument("--samples-per-epoch", type=int, metavar="N",
                   help="epoch size for the time-per-epoch estimate (default: the recipe's dataset)")
    b.add_argument("--csv", metavar="PATH", help="write the table as CSV")
    b.add_argument("--png", metavar="PATH", help="write the speedup chart as PNG")
    b.add_argument("--json", action="store_true", help="print the whole result (with raw step times) as JSON")
    # batch_size None tells "not given" apart (a script's batch is unknown unless given).
    p.set_defaults(func=main, batch_size=None, run_defaults={
        dest: parent.get_default(dest) for dest in (*NOT_FOR_BENCH, "batch_size")})


def build_config(args: argparse.Namespace):
    """The benchmark config from parsed arguments (``run.build_request`` makes the training part)."""
    from ddpstudio.core.bench import BenchConfig
    from ddpstudio.core.bench.analysis import parse_world_sizes

    for dest, instead in NOT_FOR_BENCH.items():
        if getattr(args, dest) != args.run_defaults[dest]:
            raise ValueError(f"--{dest.replace('_', '-')} is not a benchmark option"
                             + (f"; use {instead}" if instead else ""))
    script_batch = args.batch_size if args.script else None
    if args.batch_size is None:
        args.batch_size = args.run_defaults["batch_size"]
    request = run_cli.build_request(args)
    sizes = parse_world_sizes(args.world_sizes) if args.world_sizes else None
    return BenchConfig(request=request, world_sizes=sizes, steps=args.steps, warmup=args.warmup,
                       compare=list(dict.fromkeys(args.compare)), samples_per_epoch=args.samples_per_epoch,
                       script_batch_size=script_batch)


class ProgressLine:
    """Prints one line per phase change to stderr (the table goes to stdout)."""

    def __init__(self, out=None) -> None:
        self.out = out or sys.stderr
        self.last: tuple | None = None

    def __call__(self, p) -> None:
        key = (p.run_index, p.phase)
        if key == self.last:
            return
        self.last = key
        head = f"[{p.run_index + 1}/{p.runs}] {p.world_size} rank{'s' if p.world_size != 1 else ''}"
        words = {"starting": "starting", "warmup": f"warming up ({p.total_steps} steps in all)",
                 "measuring": "measuring", "done": "done", "failed": f"failed: {p.message}"}
        print(f"{head} ({p.variant}): {words.get(p.phase, p.phase)}", file=self.out, flush=True)


def main(args: argparse.Namespace) -> int:
    from ddpstudio.core.bench import Benchmark
    from ddpstudio.core.bench.export import format_table, machine_summary
    from ddpstudio.core.policy import PolicyError
    from ddpstudio.core.validate import check_request

    module_problem = run_cli.module_as_script(args)
    if module_problem:
        return run_cli.fail(module_problem)
    script_problem = run_cli.positional_script(args)
    if script_problem:
        return run_cli.fail(script_problem)
    try:
        config = build_config(args)
    except ValueError as exc:
        return run_cli.fail(str(exc))
    from ddpstudio.core.outputfile import file_problem, write_failure

    problems = check_request(config.request)
    problems += [file_problem(path, what) for path, what in ((args.csv, "the CSV file"), (args.png, "the chart"))
                 if path and file_problem(path, what)]
    if problems:
        for problem in problems:
            print(f"ddpstudio: error: {problem}", file=sys.stderr)  # a Problem, or an output file's line
        return run_cli.EXIT_BAD_INPUT
    bench = Benchmark(config, on_progress=ProgressLine())
    try:
        bench.check()
    except (PolicyError, ValueError) as exc:
        return run_cli.fail(str(exc))

    def on_interrupt(_signum, _frame):
        print("\nstopping the benchmark", file=sys.stderr)
        bench.stop()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        result = bench.run()
    finally:
        signal.signal(signal.SIGINT, previous)
    for path, write in ((args.csv, write_csv), (args.png, write_png)):
        try:
            if path:
                write(result, path)
        except OSError as exc:  # after the check: the disk filled up meanwhile, say; the results still print
            print(f"ddpstudio: error: {write_failure(path, exc)}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        m = result.machine
        print(f"\n{m.get('platform')}, {machine_summary(m)}, torch {m.get('torch')}")
        print(format_table(result))
        print(result.verdict)
        for note in result.notes:
            print(f"note: {note}")
        for label, path in (("CSV", args.csv), ("chart", args.png)):
            if path:
                print(f"{label}: {path}")
    if result.stopped:
        return 3
    return 0 if result.rows and all(r.ok for r in result.rows) else 1
