"""Adapter: reads uv's human-readable output to move the progress bar.

uv has no machine-readable progress; piped, it prints one line when a large
download starts ("Downloading torch (2.4GiB)") and one when it ends
(" Downloaded torch"). The share of announced bytes that has arrived is a
fair hint for the bar during the long install step. Only the bar uses it;
a uv that words things differently just leaves the bar where it was.
"""

from __future__ import annotations

import re

_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_STARTED = re.compile(r"^\s*Downloading (?P<name>\S+) \((?P<size>[\d.]+)\s*(?P<unit>B|KiB|MiB|GiB)\)")
_FINISHED = re.compile(r"^\s*Downloaded (?P<name>\S+)\s*$")
_INSTALLED = re.compile(r"^\s*Installed \d+ packages?")
# Downloads are most of the step, not all of it: unpacking and linking follow.
DOWNLOAD_SHARE = 0.9


class DownloadTally:
    """Bytes announced and bytes finished, from uv's lines."""

    def __init__(self) -> None:
        self.sizes: dict[str, float] = {}
        self.finished: set[str] = set()
        self.installed = False

    def feed(self, line: str) -> None:
        started = _STARTED.match(line)
        if started:
            self.sizes[started["name"]] = float(started["size"]) * _UNITS[started["unit"]]
            return
        finished = _FINISHED.match(line)
        if finished and finished["name"] in self.sizes:
            self.finished.add(finished["name"])
        elif _INSTALLED.match(line):
            self.installed = True

    @property
    def fraction(self) -> float:
        """0..1 of the step: downloads up to DOWNLOAD_SHARE, "Installed N packages" the rest."""
        if self.installed:
            return 1.0
        total = sum(self.sizes.values())
        if not total:
            return 0.0
        return DOWNLOAD_SHARE * sum(self.sizes[n] for n in self.finished) / total
