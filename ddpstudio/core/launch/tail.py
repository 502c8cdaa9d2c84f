"""Reads the lines appended to a file since the last call (a growing log or events file)."""

from __future__ import annotations

import os
import re
from itertools import accumulate
from pathlib import Path

# A carriage return not followed by a newline: a progress bar (tqdm) redrawing its line.
_REDRAW = re.compile(rb"\r(?!\n)")


class LineTail:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._fh = None
        self._partial = b""
        self._base = 0  # the file offset of the first byte not yet given as part of a line
        # The file offset at which each segment of the last read_segments() starts (a redrawn line's segments
        # share their line's): where a line sits against the rank helper's step marks (core/launch/stepmarks.py).
        self.starts: list[int] = []

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
            self.starts = []
            return []
        base = self._base
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if final and self._partial:
            lines.append(self._partial)
            self._partial = b""
        starts = list(accumulate([len(line) + 1 for line in lines], initial=base))
        self._base = base + len(data) - len(self._partial)
        if b"\r" not in data:  # no progress bar, no \r\n: each line is one segment (issue 20: per-line CPU)
            self.starts = starts[:len(lines)]
            return [(self._decode(line), False) for line in lines]
        out: list[tuple[str, bool]] = []
        self.starts = []
        for line, start in zip(lines, starts):
            segments = self._split(line.rstrip(b"\r"), redraws)
            out += segments
            self.starts += [start] * len(segments)
        if redraws and self._partial:
            # Updates of a line still being redrawn: all but the newest are complete. A trailing \r
            # may be the first half of a \r\n: it stays with the partial line.
            held = b"\r" if self._partial.endswith(b"\r") else b""
            *done, last = _REDRAW.split(self._partial[:len(self._partial) - len(held)])
            self._base += len(self._partial) - len(last + held)
            self._partial = last + held
            redrawn = [(self._decode(seg), True) for seg in done if seg.strip()]
            out += redrawn
            self.starts += [starts[-1]] * len(redrawn)
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
