"""``ddpstudio runs``: list past runs with their results and disk use; ``runs delete ID...`` removes them."""

from __future__ import annotations

import argparse
import json
import sys
import time

from ddpstudio.cli.progress import format_eta
from ddpstudio.core import protocol

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1  # a folder could not be removed (Windows: a file held open)


def add_parser(sub) -> None:
    p = sub.add_parser("runs", help="list past runs (results, disk use); 'runs delete ID...' removes them",
                       description="List every run in the runs folder, newest first: start time, duration, "
                                   "state, model, world size, backend, final train loss, best eval metric, "
                                   "mean samples/s and disk use.")
    p.add_argument("--json", action="store_true", help="print one JSON object: runs and total_bytes")
    actions = p.add_subparsers(dest="runs_command", metavar="ACTION")
    delete = actions.add_parser("delete", help="delete runs: their folders and registry records",
                                description="Delete the named runs (folders and registry records). A run "
                                            "that is still running is refused; nothing is deleted then.")
    delete.add_argument("ids", nargs="+", metavar="ID", help="run ids as 'ddpstudio runs' lists them")
    p.set_defaults(func=main)


def format_size(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _row(e) -> list[str]:
    best = f"{e.best_eval.metric.removeprefix('eval_')} {e.best_eval.value:.4g}" if e.best_eval else "-"
    kind = "bench" if e.origin == "bench" else ""
    return [e.run_id, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.started)),
            format_eta(e.duration_s) if e.duration_s is not None else "-", protocol.outcome_text(e.state) + (f" ({kind})" if kind else ""),
            e.what, str(e.world_size), e.machines_text or "1", e.backend, _num(e.final_loss, ".4f"), best,
            _num(e.mean_samples_per_s, ".1f"), format_size(e.size_bytes)]


HEADINGS = ["run", "started", "duration", "state", "what", "ranks", "machines", "backend", "final loss", "best eval",
            "samples/s", "disk"]


def print_table(entries, out=None) -> None:
    out = out or sys.stdout
    table = [HEADINGS, *(_row(e) for e in entries)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADINGS))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip(), file=out)


def main(args: argparse.Namespace) -> int:
    from ddpstudio.core import paths
    from ddpstudio.core.metrics import catalog

    if args.runs_command == "delete":
        try:
            deleted = catalog.delete_runs(args.ids)
        except catalog.RunsError as exc:
            print(f"ddpstudio: error: {exc}", file=sys.stderr)
            return EXIT_FAILED if isinstance(exc, catalog.DeleteFailed) else EXIT_BAD_INPUT
        for folder in deleted:
            print(f"deleted {folder}")
        return 0
    entries = catalog.list_entries()
    total = sum(e.size_bytes for e in entries)
    if args.json:
        print(json.dumps({"runs_dir": str(paths.runs_dir()), "runs": [e.to_dict() for e in entries],
                          "total_bytes": total}, indent=2))
        return 0
    if not entries:
        print(f"no runs yet in {paths.runs_dir()}")
        return 0
    print_table(entries)
    print(f"{len(entries)} run(s), {format_size(total)} in {paths.runs_dir()}")
    return 0
