"""Grab the Compare tab for the docs: ``python -m ddpstudio.gui.compare_screenshot OUT.png RUN_DIR...``.

Opens the real window (under ``xvfb-run -a`` without a display), compares the
given run folders (the first is the baseline) against wall time, saves the
PNG and quits. Make the runs first, e.g. ``ddpstudio run --demo --world-size 1``
and ``--world-size 2`` with the same settings.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddpstudio.gui.compare_screenshot")
    parser.add_argument("out")
    parser.add_argument("runs", nargs="+", help="run folders, baseline first")
    parser.add_argument("--size", default="1360x860")
    parser.add_argument("--log-y", action="store_true")
    args = parser.parse_args(argv)

    from PySide6.QtCore import QTimer

    from ddpstudio.core.metrics.compare import XAxis
    from ddpstudio.gui.screenshot import open_window

    app, window = open_window(args.size)
    window.show()
    view = window.run_view.compare_view

    done = {"started": False, "grabbed": False}

    def grab(_count: int) -> None:
        if done["grabbed"]:
            return
        done["grabbed"] = True
        view.set_x_axis(XAxis.WALL)
        view.log_box.setChecked(args.log_y)
        poll.start(300)

    def save() -> None:
        if window.machine_panel.cpu_mode is None:  # wait for the machine panel, so the shot is complete
            return
        poll.stop()
        QTimer.singleShot(800, lambda: (window.grab().save(args.out), print(f"saved {args.out}"), window.close()))

    def start() -> None:
        if done["started"]:
            return
        done["started"] = True
        window.runs_panel.select_dirs(args.runs)
        window.run_view.compare(args.runs)

    poll = QTimer()
    poll.timeout.connect(save)
    view.compared.connect(grab)
    window.runs_panel.runs_listed.connect(lambda _n: QTimer.singleShot(300, start))
    window.destroyed.connect(app.quit)
    app.setQuitOnLastWindowClosed(True)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
