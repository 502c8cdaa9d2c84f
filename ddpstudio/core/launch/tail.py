"""Reads the lines appended to a file since the last call (a growing log or events file)."""

from __future__ import annotations

import os
import re
from pathlib import Path

# A carriage return not followed by a newline: a progress bar (tqdm) redrawing its line.
_REDRAW = re.compile(rb"\r(?!\n)")


class LineTail:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._fh = None
        self._partial = b""

    def _read(self) -> bytes | None:
        if self._fh is None:
            try:
                self._fh = open(self.path, "rb")
            except FileNotFoundError:
                return None
        return self._partial + self._fh.read()

    def read_lines(self, final: bool = False) -> list[str]:
        """Complete new lines; with ``final`` also a last line that has no newline yet."""
        return [text for text, redrawn in self.read_segments(final, redraws=False)]

    def read_segments(self, final: bool = False, redraws: bool = True) -> list[tuple[str, bool]]:
        """New lines as ``(text, redrawn)``; with ``redraws`` a line rewritten with ``\\r`` gives
        every version, the earlier ones marked ``redrawn`` (a progress bar's updates)."""
        data = self._read()
        if data is None:
            return []
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if final and self._partial:
            lines.append(self._partial)
            self._partial = b""
        if b"\r" not in data:  # no progress bar, no \r\n: each line is one segment (issue 20: per-line CPU)
            return [(self._decode(line), False) for line in lines]
        out: list[tuple[str, bool]] = []
        for line in lines:
            out += self._split(line.rstrip(b"\r"), redraws)
        if redraws and self._partial:
            # Updates of a line still being redrawn: all but the newest are complete. A trailing \r
            # may be the first half of a \r\n: it stays with the partial line.
            held = b"\r" if self._partial.endswith(b"\r") else b""
            *done, last = _REDRAW.split(self._partial[:len(self._partial) - len(held)])
            self._partial = last + held
            out += [(self._decode(seg), True) for seg in done if seg.strip()]
        return out

    def _split(self, line: bytes, redraws: bool) -> list[tuple[str, bool]]:
        if not redraws:
            return [(self._decode(line), False)]
        *earlier, last = _REDRAW.split(line)
        return [(self._decode(seg), True) for seg in earlier if seg.strip()] + [(self._decode(last), False)]

    @staticmethod
    def _decode(raw: bytes) -> str:
        return raw.decode("utf-8", errors="replace")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
