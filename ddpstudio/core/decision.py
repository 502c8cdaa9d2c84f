"""A choice made for the user, with the one-line reason every front end shows beside it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    value: object
    reason: str
