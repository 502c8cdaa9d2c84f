"""Grab the window mid-run, for the docs: ``python -m ddpstudio.gui.screenshot OUT.png [--steps N] [--bench]
[--idle] [--past RUN_DIR] [--size WxH]``.

Opens the real window (run it under ``xvfb-run -a`` on a machine without a
display), launches the built-in demo from it, waits until ``--steps`` global
steps have been plotted, saves the PNG, stops the run and quits. With
``--bench`` it runs the Benchmark tab's default sweep (1 and 2 ranks) instead
and grabs the tab when the benchmark is done; with ``--idle`` it grabs the
window before anything ran, and with ``--past RUN_DIR`` that run reopened
from the Runs tab.
"""

from __future__ import annotations

import argparse
import sys


def open_window(size: str):
    """The application and a real window of ``size`` ("WIDTHxHEIGHT"), its questions answered yes."""
    from PySide6.QtWidgets import QApplication

    from ddpstudio.gui.dialogs import ScriptedDialogs
    from ddpstudio.gui.icon import app_icon
    from ddpstudio.gui.mainwindow import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setWindowIcon(app_icon())
    window = MainWindow(dialogs=ScriptedDialogs(yes=True))
    width, height = (int(v) for v in size.split("x"))
    window.resize(width, height)
    return app, window


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddpstudio.gui.screenshot")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=40, help="grab after this many global steps")
    parser.add_argument("--idle", action="store_true", help="grab the idle window instead of a run")
    parser.add_argument("--bench", action="store_true", help="run the Benchmark tab and grab it when done")
    parser.add_argument("--past", metavar="RUN_DIR", help="grab this past run, reopened from the Runs tab")
    parser.add_argument("--size", default="1360x860")
    args = parser.parse_args(argv)

    from PySide6.QtCore import QTimer

    from ddpstudio.gui.form_state import SetupState

    app, window = open_window(args.size)
    window.form.set_state(SetupState(batch_size=32, lr=0.02, epochs=3, image_size=32, lr_schedule="cosine",
                                     warmup_steps=5, eval_every=10))
    window.show()
    state = {"launched": False}

    def grab() -> None:
        window.grab().save(args.out)
        print(f"saved {args.out}")
        window.close()  # asks (answered yes), stops the run, closes when it has ended

    def poll(timer) -> None:
        if args.past:
            if not state["launched"] and window.check.latest is not None and not window.check.pending:
                state["launched"] = True
                window.past_run_shown.connect(lambda _run: QTimer.singleShot(1500, grab))
                window.past_runs.show(args.past)
            return
        if args.idle:
            if window.check.latest is not None and not window.check.pending:
                timer.stop()
                QTimer.singleShot(1500, grab)
            return
        if args.bench:
            bench = window.bench_view
            if not state["launched"] and bench.can_run:
                state["launched"] = True
                window.tabs.setCurrentWidget(bench)
                bench.run()
            elif state["launched"] and bench.controller.result is not None and not bench.controller.active:
                timer.stop()
                QTimer.singleShot(500, grab)  # let the chart draw its last frame
            return
        if not state["launched"] and window.launch_action.isEnabled():
            state["launched"] = True
            window.launch()
        metrics = window.metrics
        if state["launched"] and metrics is not None and metrics.step >= args.steps:
            timer.stop()
            grab()

    return run_until_closed(app, window, poll)


def run_until_closed(app, window, poll) -> int:
    """Call ``poll(timer)`` every 200 ms (it stops the timer when it is done) until the window is closed;
    the application's exit status."""
    from PySide6.QtCore import QTimer

    timer = QTimer()
    timer.timeout.connect(lambda: poll(timer))
    timer.start(200)
    window.destroyed.connect(app.quit)
    app.setQuitOnLastWindowClosed(True)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
