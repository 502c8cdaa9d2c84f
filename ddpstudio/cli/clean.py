"""``ddpstudio clean``: list stale store files and orphaned ranks, then remove them in one step."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

EXIT_LEFT = 1  # something was left (each item says why), or the user said no


def add_parser(sub) -> None:
    p = sub.add_parser(
        "clean", help="find and remove stale FileStore files and orphaned ranks",
        description="Find what killed runs left behind (FileStore files, ranks still running, processes "
                    "holding a store file open), then stop the orphans and delete the stale files. "
                    "Live runs are never touched; processes DDP Studio did not start only with "
                    "--include-foreign.")
    p.add_argument("--dry-run", action="store_true", help="show what would be done, do nothing")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask before acting")
    p.add_argument("--include-foreign", action="store_true",
                   help="also stop the listed processes that DDP Studio did not start but that hold a stale "
                        "store file open")
    p.add_argument("--json", action="store_true", help="print one JSON object: findings and report")
    p.set_defaults(func=main)


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def print_findings(findings: dict[str, Any], out: TextIO | None = None) -> None:
    """The findings of ``hygiene.scan().to_dict()``, for people (doctor prints them too)."""
    out = out or sys.stdout
    if findings.get("empty"):
        print("leftovers: none (no stale store files, no orphaned ranks)", file=out)
        return
    print("leftovers from earlier runs:", file=out)
    if findings.get("stale_stores"):
        print("  stale store files (a new run on one would hang or fail):", file=out)
        for s in findings["stale_stores"]:
            print(f"    {s['path']}  ({s['reason']})", file=out)
    if findings.get("orphans"):
        print("  orphaned ranks (ours; their run is over):", file=out)
        for p in findings["orphans"]:
            rank = f"rank {p['rank']} " if p.get("rank") is not None else ""
            print(f"    pid {p['pid']} {p['name']}, {rank}of run {p['run_id']}: {_short(p['cmdline'])}", file=out)
    if findings.get("lock_holders"):
        print("  processes holding a stale store file open:", file=out)
        for p in findings["lock_holders"]:
            mark = "ours" if p.get("ours") else "NOT OURS"
            print(f"    pid {p['pid']} {p['name']} [{mark}] has {p['path']} open: {_short(p['cmdline'])}", file=out)
    if findings.get("corrupt_records"):
        print("  unreadable registry records (skipped):", file=out)
        for c in findings["corrupt_records"]:
            print(f"    {c['path']}: {c['reason']}", file=out)
    hint = "  run 'ddpstudio clean' to remove them ('--dry-run' shows what it would do)"
    if findings.get("foreign"):
        hint += "; processes marked NOT OURS are stopped only with --include-foreign"
    print(hint, file=out)


def _confirm(question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


def main(args: argparse.Namespace) -> int:
    from ddpstudio.core.cleanup.hygiene import clean, scan

    findings = scan()
    if not args.json:
        print_findings(findings.to_dict())
    include_foreign = args.include_foreign
    report = None
    code = 0
    if findings.empty:
        pass
    elif args.dry_run:
        report = clean(findings, include_foreign=include_foreign, dry_run=True)
    elif not args.yes and not sys.stdin.isatty():
        print("ddpstudio: not asking without a terminal: add --yes to clean up, or --dry-run to see what "
              "would be done", file=sys.stderr)
        code = EXIT_LEFT
    elif not args.yes and not _confirm("Clean up the leftovers listed above?"):
        code = EXIT_LEFT
    else:
        if include_foreign and findings.foreign and not args.yes:
            include_foreign = _confirm(f"Also stop {len(findings.foreign)} process(es) marked NOT OURS?")
        report = clean(findings, include_foreign=include_foreign)
        code = EXIT_LEFT if report.left else 0
    if args.json:
        print(json.dumps({"findings": findings.to_dict(), "report": report.to_dict() if report else None},
                         indent=2))
    elif report is not None:
        print(report.summary())
    return code
