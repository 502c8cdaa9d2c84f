"""The typed events the bootstrap emits; the console and the window consume them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

from ddpstudio.bootstrap.failure import BootstrapFailure


@dataclass(frozen=True)
class StepStarted:
    index: int  # 1-based
    total: int
    title: str


@dataclass(frozen=True)
class LogLine:
    text: str


@dataclass(frozen=True)
class Finished:
    record: dict[str, Any]


@dataclass(frozen=True)
class Failed:
    failure: BootstrapFailure


Event = Union[StepStarted, LogLine, Finished, Failed]
Sink = Callable[[Event], None]
