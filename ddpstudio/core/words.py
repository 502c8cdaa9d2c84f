"""Counts in the words every front end prints: "1 rank", "2 ranks"."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, plural unless the count is one (``plural`` where adding "s" is wrong)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
