"""Captures the setup window for docs/install.md, from real runs.

    xvfb-run -a python installer/screenshots.py docs/images [--torch-index URL ...]

Runs the real bootstrap (tkinter window, real uv, real downloads) in a
temporary installation folder twice: once to success, grabbing the window
while PyTorch installs and when it is done; once against an index that
cannot be reached, grabbing the failure with its Retry button. Linux has no
github.com here, so this machine's Python is used. Extra arguments are the
bootstrap's source overrides (see ``python -m ddpstudio.bootstrap --help``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import build  # noqa: E402
import uvbinary  # noqa: E402
from PIL import ImageGrab  # noqa: E402

from ddpstudio.bootstrap.cli import options_from, parser  # noqa: E402
from ddpstudio.bootstrap.layout import Layout  # noqa: E402
from ddpstudio.bootstrap.window import ProgressWindow  # noqa: E402
from ddpstudio.core.platform import current  # noqa: E402


def grab(win: ProgressWindow, path: Path) -> None:
    win.root.update()
    x, y = win.root.winfo_rootx(), win.root.winfo_rooty()
    w, h = win.root.winfo_width(), win.root.winfo_height()
    ImageGrab.grab(bbox=(x, y, x + w, y + h), xdisplay=os.environ["DISPLAY"]).save(path)
    print(f"wrote {path}")


def capture(options, out: Path, shots: dict[str, str]) -> None:
    """Runs one setup in the window; ``shots`` maps a moment ("installing", "done", "failed") to a file name."""
    win = ProgressWindow(options)
    taken: set[str] = set()

    def watch() -> None:
        model = win.model
        moment = None
        if model.state == "running" and model.step_index == 3 and time.monotonic() - win.started_at > 12:
            moment = "installing"
        elif model.state in ("done", "failed"):
            moment = model.state
        if moment in shots and moment not in taken:
            win.root.after(300, lambda m=moment: grab(win, out / shots[m]))
            taken.add(moment)
        if model.state in ("done", "failed") and len(taken) == len(shots):
            win.root.after(1200, win.shut)
            return
        win.root.after(200, watch)

    win.root.after(200, watch)
    win.run()


def main(argv: list[str] | None = None) -> int:
    outer = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    outer.add_argument("out", type=Path)
    args, rest = outer.parse_known_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    platform = current()
    with tempfile.TemporaryDirectory(prefix="ddpstudio-shots-") as tmp:
        root = Path(tmp) / "DDPStudio"
        layout = Layout(root, platform)
        tag = uvbinary.WINDOWS if platform.is_windows else uvbinary.LINUX
        layout.root.mkdir()
        shutil.copy2(uvbinary.uv_binary(tag, HERE.parent / "build" / "installer" / "uv-cache"), layout.uv)
        build.build_wheel(layout.wheels_dir)
        python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))

        ok = parser().parse_args(["setup", "--root", str(root), "--python", python, *rest])
        capture(options_from(ok, root), args.out, {"installing": "install-progress.png", "done": "install-done.png"})

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{sock.getsockname()[1]}/simple"
        bad = parser().parse_args(["setup", "--root", str(Path(tmp) / "offline"), "--python", python, "--torch-index", dead,
                                   "--default-index", dead, "--uv", str(layout.uv), "--wheel", str(layout.app_wheel())])
        capture(options_from(bad, Path(tmp) / "offline"), args.out, {"failed": "install-failed.png"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
