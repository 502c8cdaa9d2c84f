"""Resizing the window while a run pours 2,000 events/s in: how long one frame takes to draw.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/gui_resize.py \
        [--rate 2000] [--seconds 20] [--every-ms 100] [--json out.json]

The real MainWindow launches a run whose launcher is benchmarks/gui_event_source.py
(the protocol at a fixed rate, with lr and eval events so all six plots draw;
see benchmarks/gui_ingest.py). Once the curves hold their full 1,024 points,
every --every-ms the window is resized to the next of a cycle of sizes
(1280x720 up to 1920x1080) and repainted at once; the frame time is
``resize()`` plus a synchronous ``repaint()`` of the whole window: the
layout, every plot's new view transform, and painting all curves (clipped
to the view and downsampled, smoothed loss with its faint raw curve), the
log and the progress bar. Target: p99 under 33 ms (30 frames a second).
Reported as wall time and as the GUI thread's CPU time (on a shared, loaded
machine the wall time mostly measures waiting for a core).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FRAME_TARGET_MS = 33.0
SIZES = ((1280, 720), (1440, 810), (1600, 900), (1920, 1080), (1366, 768))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--every-ms", type=int, default=100)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["DDPSTUDIO_HOME"] = tempfile.mkdtemp(prefix="ddpstudio-gui-resize-")

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from ddpstudio.gui.dialogs import ScriptedDialogs
    from ddpstudio.gui.form_state import SetupState
    from ddpstudio.gui.mainwindow import MainWindow

    app = QApplication(sys.argv[:1])
    window = MainWindow(dialogs=ScriptedDialogs(yes=True))
    window.form.set_state(SetupState(batch_size=8))
    window.resize(*SIZES[0])
    window.show()
    source = [sys.executable, str(HERE / "gui_event_source.py"), "--rate", str(args.rate),
              "--seconds", str(args.seconds)]
    start = window.controller.start
    window.controller.start = lambda plan: start(plan, command=source + ["--run-dir", plan.run_dir])
    frames_ms: list[float] = []
    cpu_ms: list[float] = []  # the GUI thread's CPU time per frame: what the frame costs without other load
    state = {"i": 0, "events_at_first_frame": None}
    result: dict = {"rate": args.rate, "seconds": args.seconds, "every_ms": args.every_ms,
                    "platform": app.platformName(), "cpus": os.cpu_count(), "load_average_before": os.getloadavg()}

    def frame() -> None:
        m = window.metrics
        if m is None or len(m.global_loss) < m.capacity // 2:
            return  # wait until the curves are long: the frame cost that matters
        if state["events_at_first_frame"] is None:
            state["events_at_first_frame"] = window.controller.events_seen
        state["i"] += 1
        t0, c0 = time.perf_counter(), time.thread_time()
        window.resize(*SIZES[state["i"] % len(SIZES)])
        window.repaint()
        frames_ms.append((time.perf_counter() - t0) * 1000)
        cpu_ms.append((time.thread_time() - c0) * 1000)

    resizer = QTimer()
    resizer.timeout.connect(frame)

    def on_started(_event) -> None:
        resizer.start(args.every_ms)
        state["t0"] = time.monotonic()

    def on_finished(event) -> None:
        resizer.stop()
        m = window.metrics
        wall = time.monotonic() - state["t0"]
        result.update({
            "state": event.get("state"),
            "events_per_s": window.controller.events_seen / wall,
            "frames": len(frames_ms),
            "frame_ms": {"p50": percentile(frames_ms, 50), "p90": percentile(frames_ms, 90),
                         "p99": percentile(frames_ms, 99), "max": max(frames_ms, default=float("nan")),
                         "mean": statistics.fmean(frames_ms) if frames_ms else float("nan")},
            "frame_cpu_ms": {"p50": percentile(cpu_ms, 50), "p90": percentile(cpu_ms, 90),
                             "p99": percentile(cpu_ms, 99)},
            "points_per_curve": len(m.global_loss),
            "curves": sum(len(p.curves) + len(p.raw) for p in window.plots.all),
            "smoothing": window.plots.loss.smoothing,
            "load_average_after": os.getloadavg(),
        })
        result["verdict"] = {"frame_p99_under_33ms": result["frame_ms"]["p99"] < FRAME_TARGET_MS}
        window.close()
        app.quit()

    def launch_when_ready() -> None:
        if window.launch_action.isEnabled():
            waiting.stop()
            window.launch()

    window.controller.run_started.connect(on_started)
    window.controller.run_finished.connect(on_finished)
    waiting = QTimer()
    waiting.timeout.connect(launch_when_ready)
    waiting.start(100)
    app.exec()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0 if result.get("verdict", {}).get("frame_p99_under_33ms") else 1


if __name__ == "__main__":
    sys.exit(main())
