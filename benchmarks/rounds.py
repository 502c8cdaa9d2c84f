"""Rounds of side-by-side runs on a shared machine (restarts.py, hangwatch.py): each round runs every kind,
the order alternating between rounds so that drift hits all kinds alike, the load average read between
rounds; and what the tables' heading and the JSON file say of them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Sequence


def rotate(kinds: Sequence[str], count: int, run_one: Callable[[str], object]) -> tuple[list[dict], list[float]]:
    """``count`` rounds of ``{kind: run_one(kind)}`` and the 1-minute load averages before, between and after."""
    rounds, load = [], [os.getloadavg()[0]]
    for i in range(count):
        order = tuple(kinds) if i % 2 == 0 else tuple(reversed(kinds))
        rounds.append({kind: run_one(kind) for kind in order})
        load.append(os.getloadavg()[0])
    return rounds, load


def machine_load(load: list[float]) -> str:
    return f"{os.cpu_count()} cores, 1-minute load average {min(load):.1f} to {max(load):.1f}"


def save(path: str | None, args, load: list[float], rounds: list[dict]) -> None:
    if path:
        Path(path).write_text(json.dumps({"args": vars(args), "load": load, "rounds": rounds}, indent=1),
                              encoding="utf-8")
