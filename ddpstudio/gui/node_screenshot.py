"""Grab the multi-machine flow for the docs: ``python -m ddpstudio.gui.node_screenshot OUT_DIR [--steps N]``.

Opens the real window (under ``xvfb-run -a`` or ``QT_QPA_PLATFORM=offscreen``
without a display) and saves, in OUT_DIR: ``host-dialog.png`` (Run > Host a
multi-machine run...), ``host-panel.png`` (the window hosting 2 machines x 1
rank, waiting), ``join-dialog.png`` (Join a run... with that code pasted), and
``host-training.png`` once a ``ddpstudio join -`` started here has joined and
``--steps`` global steps are plotted. Then it stops the run and quits.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddpstudio.gui.node_screenshot")
    parser.add_argument("out_dir")
    parser.add_argument("--steps", type=int, default=30, help="grab the training window after this many steps")
    parser.add_argument("--size", default="1360x860")
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    from PySide6.QtCore import QTimer

    from ddpstudio.gui.form_state import SetupState
    from ddpstudio.gui.node_commands import HostRequest
    from ddpstudio.gui.screenshot import open_window

    app, window = open_window(args.size)
    window.form.set_state(SetupState(batch_size=16, image_size=32, max_steps=120, lr=0.02, lr_schedule="cosine",
                                     warmup_steps=5))
    window.show()
    flow, state = window.node_flow, {"hosted": False, "joiner": None, "grabbed": False}

    def save(widget, name: str) -> None:
        widget.grab().save(str(out / name))
        print(f"saved {out / name}", flush=True)

    def poll() -> None:
        if not state["hosted"] and window.check.latest is not None and not window.check.pending \
                and window.machine_panel.cpu_mode is not None:
            state["hosted"] = True
            dialog = flow.open_host()
            dialog.ranks.setValue(1)
            QTimer.singleShot(500, lambda: (save(dialog, "host-dialog.png"), dialog.accept()))
        metrics = window.metrics
        if state["joiner"] is not None and not state["grabbed"] and metrics is not None and metrics.step >= args.steps:
            state["grabbed"] = True
            save(window, "host-training.png")
            timer.stop()
            window.close()  # asks (answered yes), stops the run on both machines, closes when it has ended

    def hosted(_event) -> None:
        QTimer.singleShot(1000, grab_waiting)

    def grab_waiting() -> None:
        save(window, "host-panel.png")
        join = flow.open_join()
        join.paste.setPlainText(flow.panel.code)
        QTimer.singleShot(500, lambda: (save(join, "join-dialog.png"), join.reject(), start_joiner()))

    def start_joiner() -> None:
        joiner = subprocess.Popen([sys.executable, "-m", "ddpstudio", "join", "-"], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, text=True)
        joiner.stdin.write(flow.panel.code + "\n")
        joiner.stdin.close()
        state["joiner"] = joiner

    window.controller.join_code_received.connect(hosted)
    timer = QTimer()
    timer.timeout.connect(poll)
    timer.start(200)
    window.destroyed.connect(app.quit)
    app.setQuitOnLastWindowClosed(True)
    code = app.exec()
    if state["joiner"] is not None:
        state["joiner"].wait(60)
    return code


if __name__ == "__main__":
    sys.exit(main())
