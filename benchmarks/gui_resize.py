"""Resizing the window while a run pours 2,000 events/s in: one frame's cost, old vs new plot settings.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/gui_resize.py \
        [--rate 2000] [--seconds 20] [--every-ms 100] [--json out.json]

The real MainWindow launches a run whose launcher is benchmarks/gui_event_source.py
(the protocol at a fixed rate, with lr and eval events so all six plots draw;
see benchmarks/gui_harness.py). Once the curves hold at least half their
points, every --every-ms the window is resized to the next of a cycle of
sizes (1280x720 up to 1920x1080) and repainted at once; a frame is
``resize()`` plus a synchronous ``repaint()`` of the whole window (layout,
every plot's view transform and axes, the curves, the log, the progress bar).
Frames take turns between the plot settings before this change (``OLD`` in
ddpstudio/gui/plot_speed.py: plots laid out and drawn, grid included, on
every resize), ``NO_GRID`` (laid out live, grid left out until the resizing
stops) and the window's settings (``NEW``: the plots' last picture scaled
until the resizing stops, then one layout), so all see the same machine
load and the same curves; the ratios to old are the figures to read on a
shared machine. Every ``NEW`` frame here is the first of a resize burst
(it grabs the picture); the one full layout when a burst ends is not a
resize frame and is not counted. Reported as wall time and as the GUI thread's CPU time
(``time.thread_time``), with the load average before and after.
Target: p99 under 33 ms (30 frames a second).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from gui_harness import feed_from_event_source, open_window, percentile, when_launch_enabled

FRAME_TARGET_MS = 33.0
SIZES = ((1280, 720), (1440, 810), (1600, 900), (1920, 1080), (1366, 768))


def summary(values: list[float]) -> dict:
    return {q: percentile(values, n) for q, n in (("p50", 50), ("p90", 90), ("p99", 99))}


def table(result: dict, names: list[str]) -> str:
    """The variants side by side (p50 and p99), each with its ratio to the first."""
    rows = ["| measure | " + " | ".join(f"{n} p50 | {n} p99" for n in names) + " |",
            "|---|" + "---|---|" * len(names)]
    for label, key in (("frame, wall time (ms)", "wall_ms"), ("frame, GUI-thread CPU (ms)", "cpu_ms")):
        base = result[names[0]][key]
        cells = [f"{result[n][key][q]:.1f}" + ("" if n == names[0] else f" ({result[n][key][q] / base[q]:.2f}x)")
                 for n in names for q in ("p50", "p99")]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--every-ms", type=int, default=100)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    app, window = open_window("ddpstudio-gui-resize-", SIZES[0])
    from PySide6.QtCore import QTimer

    from ddpstudio.gui.plot_speed import NEW, NO_GRID, OLD

    feed_from_event_source(window, args.rate, args.seconds)
    lean = window.plots.resize_lean
    variants = {"old": OLD, "no-grid": NO_GRID, "new": NEW}
    frames: dict[str, dict[str, list[float]]] = {name: {"wall_ms": [], "cpu_ms": []} for name in variants}
    state = {"i": 0}
    result: dict = {"rate": args.rate, "seconds": args.seconds, "every_ms": args.every_ms,
                    "platform": app.platformName(), "cpus": os.cpu_count(),
                    "load_average_before": os.getloadavg(), "settings": {k: vars(v) for k, v in variants.items()}}

    def frame() -> None:
        m = window.metrics
        if m is None or len(m.global_loss) < m.capacity // 2:
            return  # wait until the curves are long: the frame cost that matters
        state["i"] += 1
        name = list(variants)[state["i"] % len(variants)]
        lean.set_speed(variants[name])  # outside the timed frame: what each frame draws is that variant's
        t0, c0 = time.perf_counter(), time.thread_time()
        window.resize(*SIZES[state["i"] % len(SIZES)])  # 5 sizes, 3 variants: each sees every size
        window.repaint()
        frames[name]["wall_ms"].append((time.perf_counter() - t0) * 1000)
        frames[name]["cpu_ms"].append((time.thread_time() - c0) * 1000)

    resizer = QTimer()
    resizer.timeout.connect(frame)

    def on_started(_event) -> None:
        resizer.start(args.every_ms)
        state["t0"] = time.monotonic()

    def on_finished(event) -> None:
        resizer.stop()
        m = window.metrics
        result.update({
            "state": event.get("state"),
            "events_per_s": window.controller.events_seen / (time.monotonic() - state["t0"]),
            "points_per_curve": len(m.global_loss),
            "curves": sum(len(p.curves) + len(p.raw) for p in window.plots.all),
            "smoothing": window.plots.loss.smoothing,
            "load_average_after": os.getloadavg(),
        })
        for name, f in frames.items():
            result[name] = {"frames": len(f["wall_ms"]), "wall_ms": summary(f["wall_ms"]), "cpu_ms": summary(f["cpu_ms"])}
        result["verdict"] = {"new_frame_p99_under_33ms": result["new"]["wall_ms"]["p99"] < FRAME_TARGET_MS,
                             "new_cpu_p99_under_33ms": result["new"]["cpu_ms"]["p99"] < FRAME_TARGET_MS}
        window.close()
        app.quit()

    window.controller.run_started.connect(on_started)
    window.controller.run_finished.connect(on_finished)
    waiting = when_launch_enabled(window, window.launch)  # noqa: F841 (the timer must live)
    app.exec()
    text = json.dumps(result, indent=2)
    print(text)
    if "new" in result:
        print(f"\nload average before {result['load_average_before']}, after {result['load_average_after']}")
        print(table(result, list(variants)))
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0 if result.get("verdict", {}).get("new_frame_p99_under_33ms") else 1


if __name__ == "__main__":
    sys.exit(main())
