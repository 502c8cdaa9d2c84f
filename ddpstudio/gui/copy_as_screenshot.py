"""Grab Run ▸ Copy as for the docs: ``python -m ddpstudio.gui.copy_as_screenshot OUT_DIR [--size WxH]``.

Opens the real window (``QT_QPA_PLATFORM=offscreen`` or ``xvfb-run -a``) and
saves, in OUT_DIR: ``copy-as-menu.png`` (the window with the Run menu and its
Copy as submenu open; a popup menu is a window of its own, so each is grabbed
and drawn where it stands) and ``copy-as-dialog.png`` (the SLURM script of the
form's setup for 4 nodes x 8 GPUs). Nothing is launched.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddpstudio.gui.copy_as_screenshot")
    parser.add_argument("out_dir")
    parser.add_argument("--size", default="1360x860")
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QPainter

    from ddpstudio.gui.form_state import SetupState
    from ddpstudio.gui.screenshot import open_window, run_until_closed

    app, window = open_window(args.size)
    window.form.set_state(SetupState(model="resnet50", data="folder", data_dir="/data/imagenet", batch_size=64,
                                     epochs=90, lr=0.1, scale_lr=True, lr_schedule="cosine", warmup_steps=500))
    window.show()
    copy_as = window.copy_as
    run_menu = window.actions.run_menu

    def open_menus() -> None:
        bar = window.menuBar()
        run_menu.popup(bar.mapToGlobal(bar.actionGeometry(run_menu.menuAction()).bottomLeft()))
        submenu = copy_as.menu.menuAction()
        run_menu.setActiveAction(submenu)
        copy_as.menu.popup(run_menu.mapToGlobal(run_menu.actionGeometry(submenu).topRight()))
        copy_as.menu.setActiveAction(copy_as.menu.actions()[1])
        QTimer.singleShot(500, grab_menus)

    def grab_menus() -> None:
        shot = window.grab()
        painter = QPainter(shot)
        for menu in (run_menu, copy_as.menu):
            painter.drawPixmap(window.mapFromGlobal(menu.pos()), menu.grab())
        painter.end()
        shot.save(str(out / "copy-as-menu.png"))
        print(f"saved {out / 'copy-as-menu.png'}", flush=True)
        copy_as.menu.hide()
        run_menu.hide()
        copy_as.dialog_opened.connect(lambda dialog: QTimer.singleShot(500, lambda: grab_dialog(dialog)))
        copy_as.from_form("slurm")

    def grab_dialog(dialog) -> None:
        dialog.nodes.setValue(4)
        dialog.procs.setValue(8)
        dialog.device.setCurrentIndex(dialog.device.findData("cuda"))
        dialog.grab().save(str(out / "copy-as-dialog.png"))
        print(f"saved {out / 'copy-as-dialog.png'}", flush=True)
        dialog.close()
        window.close()

    def poll(timer) -> None:
        if window.check.latest is not None and not window.check.pending and window.machine_panel.cpu_mode is not None:
            timer.stop()
            open_menus()

    return run_until_closed(app, window, poll)


if __name__ == "__main__":
    raise SystemExit(main())
