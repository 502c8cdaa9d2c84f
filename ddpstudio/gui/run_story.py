"""What the run is doing, told in words: the start phase by phase, and the end as a summary.

Pure functions of the run's metrics, so the progress line and its tests agree:
"Starting 2 ranks… 3 s", "Starting Python and PyTorch in 2 ranks… 5 s" (until a
rank calls init_process_group), "Waiting for all ranks to join (1 of 2 arrived)… 8 s",
"First step after 6 s", then "Training"; at the end, the outcome, duration,
losses, accuracy, throughput, and where the weights and checkpoint are.
"""

from __future__ import annotations

import time

from ddpstudio.cli.progress import format_eta
from ddpstudio.core import protocol
from ddpstudio.core.platform import Platform
from ddpstudio.core.process.exitcodes import describe_exit
from ddpstudio.gui.run_metrics import RunMetrics

FIRST_STEP_SHOWN_S = 5.0  # "first step after N s" stays this long before plain "Training"


def duration_text(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else format_eta(seconds)


def start_phase(m: RunMetrics | None, state: str, launched_t: float | None, now: float | None = None) -> str | None:
    """The start, told: None once training is under way (or when nothing is starting)."""
    now = time.time() if now is None else now
    if state not in ("starting", "running") or m is None or launched_t is None:
        return None
    elapsed = max(0.0, now - launched_t)
    world = m.info.get("world_size")
    ranks = f"{world} ranks" if world else "the ranks"
    if m.first_step_t is not None:
        after = m.first_step_t - launched_t
        return f"First step after {after:.0f} s" if now - m.first_step_t < FIRST_STEP_SHOWN_S else None
    if m.machines > m.machines_in and not m.joined:  # a host: its ranks wait for the other machines' ranks
        others = m.machines - m.machines_in
        return f"Waiting for {others} other machine{'s' if others != 1 else ''} to join… {elapsed:.0f} s"
    if state == "starting" or m.started_t is None:
        return f"Starting {ranks}… {elapsed:.0f} s"
    if not m.meeting and not m.joined:  # issue 24: "(0 of 2)" here read like a rendezvous failure
        return f"Starting Python and PyTorch in {ranks}… {elapsed:.0f} s"
    if world and len(m.joined) >= world:
        return f"All {world} ranks joined; waiting for the first step… {elapsed:.0f} s"
    arrived = f" ({len(m.meeting | m.joined)} of {world} arrived)" if world else ""  # at init_process_group
    return f"Waiting for all ranks to join{arrived}… {elapsed:.0f} s"


def summary(m: RunMetrics, platform: Platform) -> str:
    """The end of a run in one paragraph (plain text; the progress view shows it as a card)."""
    final = m.final or {}
    state = str(final.get("state") or "ended")
    said = protocol.outcome_text(state).capitalize()
    parts = [f"{said} after {duration_text(final['duration_s'])}"
             if isinstance(final.get("duration_s"), (int, float)) else said]
    world = final.get("world_size") or m.info.get("world_size")
    if world:
        parts.append(f"{world} rank{'s' if world != 1 else ''}")
    cause = final.get("root_cause") or {}
    if state == "failed" and cause:
        rank = cause.get("rank")
        # rank -1: not one rank's failure (a spawn-style script's own process, the disk, the launcher)
        who = f"rank {rank}: " if isinstance(rank, int) and rank >= 0 else ""
        parts.append(who + describe_exit(cause.get("exit_code"), platform))
    elif state == "stopped":
        parts.append("stopped on request")
    loss = m.global_loss.data()[1]
    finite = loss[loss == loss]
    if len(finite):
        parts.append(f"final loss {finite[-1]:.4f} (best {finite.min():.4f})")
    accuracies = [e["top1"] for e in m.evals if isinstance(e.get("top1"), (int, float))]
    if accuracies:
        parts.append(f"top-1 {100 * accuracies[-1]:.1f}% (best {100 * max(accuracies):.1f}%)")
    rates = m.samples_per_s.data()[1]
    rates = rates[rates == rates]
    if len(rates):
        parts.append(f"{rates.mean():.0f} samples/s")
    text = " · ".join(parts)
    where = []
    if m.model_path:
        where.append(f"weights: {m.model_path}")
    if m.checkpoints:
        where.append(f"checkpoint: {m.checkpoints[-1]}")
    if final.get("run_dir"):
        where.append(f"run folder: {final['run_dir']}")
    return "\n".join([text, *where])
