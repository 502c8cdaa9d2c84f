"""Captures the NSIS installer's pages by running it under Wine on a virtual screen.

    python installer/wine_screenshots.py dist/DDPStudio-Setup-<v>.exe docs/images

Needs ``wine``, ``Xvfb`` and ``xdotool`` (Debian packages of those names).
Walks Welcome -> Components -> Location -> Install with the Enter key, then
the uninstaller. Wine 8 cannot start uv.exe (it lacks bcryptprimitives.dll),
so the Python download fails there, which is how the "could not download
Python" message with its Retry button gets captured. A developer aid for
docs/install.md; the real installer is exercised on Windows by CI.
"""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import ImageGrab

DISPLAY = ":78"
# (file name or None, key to press afterwards, seconds to wait before the shot)
INSTALL = [
    ("installer-welcome.png", "Return", 12),
    ("installer-components.png", "Return", 3),
    ("installer-location.png", "Return", 3),
    ("installer-no-network.png", "Escape", 15),  # Cancel on the Retry/Cancel box
    ("installer-aborted.png", "Return", 4),
]
UNINSTALL = [
    ("uninstall-confirm.png", "Return", 10),
    ("uninstall-keep-data.png", "Return", 5),  # the default answer: No, keep the data
    ("uninstall-done.png", "Return", 5),
]


def grab(out: Path) -> None:
    """The screen, cropped to what is not black (the one window; Xvfb has no desktop)."""
    image = ImageGrab.grab(xdisplay=DISPLAY)
    box = image.convert("L").point(lambda v: 255 if v > 8 else 0).getbbox()
    image.crop(box).save(out)
    print(f"wrote {out}")


def walk(command: list[str], steps: list[tuple[str, str, float]], out_dir: Path, env: dict[str, str]) -> None:
    proc = subprocess.Popen(command, env=env)
    try:
        for name, key, wait in steps:
            time.sleep(wait)
            grab(out_dir / name)
            subprocess.run(["xdotool", "key", key], env=env, check=True)
        time.sleep(3)
    finally:
        proc.kill()
        subprocess.run(["wineserver", "-w"], env=env, timeout=120)


def main(argv: list[str]) -> int:
    setup, out_dir = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ddpstudio-wine-") as prefix:
        # A private HOME and no winemenubuilder: Wine would otherwise put the shortcuts on the
        # real desktop and in the Linux menus.
        home = Path(prefix) / "home"
        home.mkdir()
        env = {**os.environ, "DISPLAY": DISPLAY, "WINEPREFIX": str(Path(prefix) / "prefix"), "WINEDEBUG": "-all",
               "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config"),
               "WINEDLLOVERRIDES": "mscoree,mshtml,winemenubuilder.exe=d"}  # no Mono/Gecko install prompts
        xvfb = subprocess.Popen(["Xvfb", DISPLAY, "-screen", "0", "1024x768x24"])
        try:
            time.sleep(2)
            subprocess.run(["wine", "wineboot", "-i"], env=env, timeout=300, check=True)
            walk(["wine", str(setup)], INSTALL, out_dir, env)
            uninstaller = r"C:\users\{}\AppData\Local\Programs\DDPStudio\Uninstall.exe".format(getpass.getuser())
            walk(["wine", uninstaller], UNINSTALL, out_dir, env)
        finally:
            subprocess.run(["wineserver", "-k"], env=env)
            xvfb.kill()
            xvfb.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
