"""What a run records and prints for a script's output is pinned: events, history and the CLI's text.

The launcher and the CLI read hundreds of lines a second per rank, so their per-line code is tuned for
speed (issue 20); tuning must not change a byte of what they give. ``tests/scripts/output_mix.py`` prints
plain lines, loss lines, near misses, evaluations, ``\\r`` redraws, a ``\\r\\n`` line and a last line without
a newline; what the code gave for it before the tuning is in ``tests/data/output_pin.json``. Compared
minus what differs from run to run (times, pids, paths, the machine's reasons) and minus the interleaving
of independent sequences that depends on when the launcher polls: each event type, each output stream
and the CLI's own lines are compared in their own order.

Regenerate (only for a change meant to alter the output): ``python -m tests.test_output_pin --write``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ddpstudio.core import protocol
from ddpstudio.core.metrics import rows
from tests.studio import SCRIPTS, ddpstudio, events, final

PINNED = Path(__file__).parent / "data" / "output_pin.json"
RUN = ("run", "--script", str(SCRIPTS / "output_mix.py"), "--world-size", "1", "--dist-args", "",
       "--rendezvous-timeout", "60")
SCRIPT_TYPES = (protocol.LOG, protocol.STEP, protocol.EVAL, protocol.GLOBAL_STEP, protocol.WARNING)
VOLATILE = {"t", "pid", "duration_s", "run_dir"}
LOAD = {rows.CPU_PCT, rows.RSS_MB, rows.GPU_UTIL, rows.GPU_MEM_GB}


def recorded(run_dir: Path) -> dict:
    """events.jsonl by type (script-made types, and how the run ended) and history.jsonl's measurements."""
    by_type: dict[str, list] = {}
    with open(run_dir / "events.jsonl", encoding="utf-8") as fh:
        for ev in events(fh.read()):
            if ev.type in SCRIPT_TYPES or ev.type == protocol.RUN_FINISHED:
                item = {k: v for k, v in ev.to_dict().items() if k not in VOLATILE}
                by_type.setdefault(" ".join(filter(None, (ev.type, ev.get("stream")))), []).append(item)
    with open(run_dir / rows.FILE_NAME, encoding="utf-8") as fh:
        history = [json.loads(line) for line in fh]
    measured: dict[str, list] = {}
    for metric, key, step, _t, value in history[1:]:
        if metric not in LOAD:
            measured.setdefault(metric, []).append([key, step, value])
    return {"events": by_type, "history": measured}


def printed(text: str, logged: dict) -> dict:
    """The CLI's text: the script's stdout and stderr lines it showed, its step lines, its eval lines and
    its other lines, each in order."""
    streams = {stream: {ev["line"] for ev in logged[f"log {stream}"]} for stream in ("stdout", "stderr")}
    out: dict[str, list[str]] = {"stdout": [], "stderr": [], "step": [], "eval": [], "own": []}
    for line in text.split("\n"):
        where = next((s for s, lines in streams.items() if line in lines), line.split(" ")[0])
        out[where if where in out else "own"].append(re.sub(r"after \d+\.\d s", "after X s", line))
    header_end = next(i for i, line in enumerate(out["own"]) if line.startswith("  run folder: "))
    out["own"] = out["own"][header_end + 1:]  # the run id, the machine's reasons and the run folder
    return out


def observed() -> dict:
    """Run the script through the CLI, as text and as JSON lines; what both give, made comparable."""
    text = ddpstudio(*RUN)
    assert text.returncode == 0, text.stderr[-3000:]
    folder = Path(re.search(r"^  run folder: (.*)$", text.stdout, re.MULTILINE).group(1))
    as_json = ddpstudio(*RUN[:1], "--json", *RUN[1:])
    assert as_json.returncode == 0, as_json.stderr[-3000:]
    json_folder = Path(final(events(as_json.stdout)).get("run_dir"))
    # --json prints the launcher's stream as it is: events.jsonl's lines, byte for byte.
    assert as_json.stdout == (json_folder / "events.jsonl").read_text(encoding="utf-8")
    pinned = recorded(folder)
    assert recorded(json_folder) == pinned
    pinned["cli"] = printed(text.stdout, pinned["events"])
    return pinned


def test_a_scripts_output_gives_the_pinned_events_history_and_cli_text(studio_home):
    assert observed() == json.loads(PINNED.read_text(encoding="utf-8"))


def _dumps(value, depth: int = 0) -> str:
    """JSON with one list item per line, so a diff of the pinned file shows which line changed."""
    if isinstance(value, dict) and depth < 2:
        inner = ",\n".join(f"{json.dumps(k)}: {_dumps(v, depth + 1)}" for k, v in value.items())
        return "{\n" + inner + "\n}"
    if isinstance(value, list):
        return "[\n" + ",\n".join(json.dumps(item, ensure_ascii=False) for item in value) + "\n]"
    return json.dumps(value, ensure_ascii=False)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    PINNED.write_text(_dumps(observed()) + "\n", encoding="utf-8")
