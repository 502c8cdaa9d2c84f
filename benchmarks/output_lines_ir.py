"""The per-line code of the launcher and the CLI, in one process, for counting instructions (issue 20).

    python benchmarks/output_lines_ir.py launcher PLAN.json N STREAM.jsonl
    python benchmarks/output_lines_ir.py cli STREAM.jsonl

Under ``valgrind --tool=cachegrind --cache-sim=no`` (instruction counts do not
move with the machine's load, CPU times do): ``launcher`` runs the real
``Launcher``'s intake (``_pump`` inside ``_one_write``: events.jsonl, its
stdout stream, history.jsonl) over a rank's stdout file of N lines ``step {i}
loss {x:.4f}`` and writes the stream to STREAM.jsonl; ``cli`` feeds such a
stream through a real pipe (``cat``) to ``Session`` and the CLI's
``ProgressView``, as ``ddpstudio run`` does. Run each with N and with 1 and
divide the difference by N - 1; the checkout measured is the ``ddpstudio`` on
PYTHONPATH. PLAN.json: any script run's plan (a run folder's plan.json); the
run goes to a fresh folder next to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path


def launcher(plan_path: str, lines: int, stream: str) -> None:
    from ddpstudio.core.launch.diskguard import GuardedWriter
    from ddpstudio.core.launch.history import HistoryWriter
    from ddpstudio.core.launch.launcher import Launcher
    from ddpstudio.core.launch.lossparse import LossScraper
    from ddpstudio.core.launch.planfile import read_plan
    from ddpstudio.core.launch.rankproc import RankProc
    from ddpstudio.core.launch.tail import LineTail

    raw = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    run_id = "ir-" + uuid.uuid4().hex[:8]
    raw.update(run_id=run_id, run_dir=str(Path(raw["run_dir"]).parent / run_id))
    copy = Path(raw["run_dir"] + ".json")
    copy.write_text(json.dumps(raw), encoding="utf-8")
    plan = read_plan(str(copy))
    copy.unlink()
    with open(stream, "w", encoding="utf-8") as out:
        run = Launcher(plan, out=out)
        run.run.create()
        run._merged = GuardedWriter(run.run.merged_events, run.run.root)
        run._history = HistoryWriter(plan.run_dir, plan, time.time())
        os.makedirs(os.path.dirname(run.run.stdout(0)), exist_ok=True)
        with open(run.run.stdout(0), "w", encoding="utf-8") as fh:
            x = 2.5
            for i in range(lines):
                x *= 0.9999
                fh.write(f"step {i} loss {x:.4f}\n")
        Path(run.run.stderr(0)).touch()
        run.ranks.append(RankProc(0, None, LineTail(run.run.rank_events(0)), LineTail(run.run.stdout(0)),
                                  LineTail(run.run.stderr(0)), [], scraper=LossScraper()))
        with run._one_write():
            run._pump()
        with run._one_write():
            run._pump(final=True)
            run._settle_means(final=True)
        run._history.close()


def cli(stream: str) -> None:
    from ddpstudio.cli.progress import ProgressView
    from ddpstudio.core import protocol
    from ddpstudio.core.launch.session import Session

    session = Session.__new__(Session)  # its reading side only: the launcher is ``cat STREAM``
    session.parser, session.final, session._stderr_reader = protocol.EventParser(), None, None
    session.proc = subprocess.Popen(["cat", stream], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
                                    encoding="utf-8", errors="replace", bufsize=1)
    with open(os.devnull, "w", encoding="utf-8") as out:
        view = ProgressView(out=out, tty=False)
        if hasattr(session, "batches"):
            for batch in session.batches(unread=view.unread):
                view.feed_all(batch)
        else:  # a checkout from before Session.batches
            for event in session.events():
                view.feed(event)


if __name__ == "__main__":
    if sys.argv[1:2] == ["launcher"] and len(sys.argv) == 5:
        launcher(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1:2] == ["cli"] and len(sys.argv) == 3:
        cli(sys.argv[2])
    else:
        sys.exit(__doc__)
