"""Reads the lines appended to a file since the last call (a growing log or events file)."""

from __future__ import annotations

import os
from pathlib import Path


class LineTail:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._fh = None
        self._partial = b""

    def read_lines(self, final: bool = False) -> list[str]:
        """Complete new lines; with ``final`` also a last line that has no newline yet."""
        if self._fh is None:
            try:
                self._fh = open(self.path, "rb")
            except FileNotFoundError:
                return []
        data = self._partial + self._fh.read()
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if final and self._partial:
            lines.append(self._partial)
            self._partial = b""
        return [line.rstrip(b"\r").decode("utf-8", errors="replace") for line in lines]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
