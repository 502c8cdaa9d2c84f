"""What the progress window shows, derived from the events alone.

Kept free of tkinter so the rules (which buttons are offered when, how far
the bar is) are tested without a display; ``window.py`` only draws this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpstudio.bootstrap.events import Event, Failed, Finished, LogLine, StepStarted
from ddpstudio.bootstrap.failure import BootstrapFailure, Problem
from ddpstudio.bootstrap.uvoutput import DownloadTally

# How much of the bar each step is worth: installing PyTorch is most of the wait.
STEP_WEIGHTS = (2, 8, 75, 13, 2)
DOWNLOAD_STEP = 3  # uv's download lines move the bar inside this step


@dataclass
class ProgressModel:
    state: str = "running"  # "running", "failed" or "done"
    step_index: int = 0
    step_total: int = len(STEP_WEIGHTS)
    headline: str = "Starting..."
    failure: BootstrapFailure | None = None
    log: list[str] = field(default_factory=list)
    start_offered: bool = False  # the window has a "Start DDP Studio" button
    downloads: DownloadTally = field(default_factory=DownloadTally)

    def apply(self, event: Event) -> None:
        if isinstance(event, StepStarted):
            self.step_index, self.step_total = event.index, event.total
            self.downloads = DownloadTally()
            self.headline = f"Step {event.index} of {event.total}: {event.title}"
        elif isinstance(event, LogLine):
            self.log.append(event.text)
            if self.step_index == DOWNLOAD_STEP:
                self.downloads.feed(event.text)
        elif isinstance(event, Finished):
            self.state = "done"
            self.headline = "DDP Studio is ready."
        elif isinstance(event, Failed):
            self.state = "failed"
            self.failure = event.failure
            self.headline = "Setup did not finish."

    def restart(self) -> None:
        """A retry: same window, log kept, state and bar reset."""
        self.state, self.step_index, self.failure = "running", 0, None
        self.headline = "Trying again..."
        self.log.append("---- retry ----")

    @property
    def percent(self) -> float:
        if self.state == "done":
            return 100.0
        weights = STEP_WEIGHTS[: self.step_total]
        done = sum(weights[: max(self.step_index - 1, 0)])
        if self.step_index == DOWNLOAD_STEP and self.state == "running":
            done += weights[DOWNLOAD_STEP - 1] * self.downloads.fraction
        return 100.0 * done / sum(weights)

    @property
    def can_retry(self) -> bool:
        """Retry only where it can help (an index without the pinned torch fails the same way again)."""
        return self.state == "failed" and (self.failure is None or self.failure.retry_helps)

    @property
    def can_set_network(self) -> bool:
        """A download failed: offer proxy, certificates and the Python mirror."""
        return self.state == "failed" and self.failure is not None and self.failure.problem is Problem.NETWORK

    @property
    def can_use_cpu(self) -> bool:
        return self.state == "failed" and self.failure is not None and self.failure.cpu_fallback

    @property
    def can_start_app(self) -> bool:
        return self.state == "done"

    @property
    def message(self) -> str:
        if self.state == "failed" and self.failure is not None:
            return self.failure.message
        if self.state == "done":
            then = "Click \"Start DDP Studio\"." if self.start_offered else "Close this window to finish the installation."
            return f"PyTorch is installed and checked. {then}"
        return "This downloads PyTorch (several GB) once; it can take a while on a slow connection."
