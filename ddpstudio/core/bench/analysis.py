"""From measured rows to speedup, efficiency, epoch time and a plain-language verdict.

Pure functions: no processes, no files. Speedup is throughput over the
smallest world size's throughput in the same variant (1 GPU when 1 was
measured); efficiency is speedup over the ideal, linear, speedup.
"""

from __future__ import annotations

import math

from ddpstudio.core.bench.model import BenchRow

GOOD_EFFICIENCY = 0.7  # the blog's 4-GPU Windows figure (0.77) counts as "pays off"
FAIR_EFFICIENCY = 0.5
DATA_BOUND = 0.2  # ranks waiting for data this share of a step: the loader is the bottleneck
LOW_GPU_UTIL = 60.0


def default_world_sizes(gpu_count: int, cpu_mode: bool) -> list[int]:
    """1, 2, 4 ... up to the GPU count (plus the count itself); 1 and 2 on the CPU."""
    if cpu_mode or gpu_count < 1:
        return [1, 2]
    sizes, n = [], 1
    while n <= gpu_count:
        sizes.append(n)
        n *= 2
    if sizes[-1] != gpu_count:
        sizes.append(gpu_count)
    return sizes


def parse_world_sizes(text: str) -> list[int]:
    """"1,2,4" -> [1, 2, 4]; sorted, without repeats; each at least 1."""
    try:
        sizes = sorted({int(part) for part in text.replace(" ", "").split(",") if part})
    except ValueError:
        raise ValueError(f"world sizes must be whole numbers separated by commas, such as 1,2,4 (got {text!r})")
    if not sizes or sizes[0] < 1:
        raise ValueError(f"world sizes must be at least 1 (got {text!r})")
    return sizes


def rate(row: BenchRow) -> float | None:
    """Samples/s; for a script of unknown batch, rank-steps/s (a constant per-rank batch assumed)."""
    if row.samples_per_s is not None:
        return row.samples_per_s
    if row.steps_per_s is not None and row.batch_mode == "per-rank":
        return row.steps_per_s * row.world_size
    return None


def baseline(rows: list[BenchRow]) -> BenchRow | None:
    """The smallest world size that ran and has a throughput."""
    usable = [r for r in rows if r.ok and rate(r)]
    return min(usable, key=lambda r: r.world_size) if usable else None


def epoch_time(row: BenchRow, samples_per_epoch: int | None = None) -> float | None:
    """Seconds per epoch: the given epoch size over samples/s, else steps per epoch x step time."""
    if samples_per_epoch and row.samples_per_s:
        return samples_per_epoch / row.samples_per_s
    if row.steps_per_epoch and row.step_time_s:
        return row.steps_per_epoch * row.step_time_s
    return None


def fill_derived(rows: list[BenchRow], samples_per_epoch: int | None = None) -> None:
    """Set speedup, efficiency and epoch time on every row, per variant."""
    variants = list(dict.fromkeys(r.variant for r in rows))
    for variant in variants:
        group = [r for r in rows if r.variant == variant]
        base = baseline(group)
        for row in group:
            row.epoch_time_s = epoch_time(row, samples_per_epoch)
            r = rate(row)
            if base is None or not row.ok or not r:
                row.speedup = row.efficiency = None
                continue
            row.speedup = r / rate(base)
            row.efficiency = row.speedup / (row.world_size / base.world_size)


# -- words ---------------------------------------------------------------------

def format_speedup(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def format_pct(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{100 * fraction:.0f}%"


def format_duration(seconds: float | None) -> str:
    """The blog's style: "58m 55s", "1h 02m 05s", "12.3 s"."""
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    if seconds < 60:
        return f"{seconds:.1f} s"
    total = int(round(seconds))
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def _lost_to(device: str) -> str:
    """Where lost speed-up goes, as far as whole-step timings can say (issue 24: a CPU-bound, contended
    machine was told "lost to communication"; the benchmark never times the gradient exchange apart)."""
    if device == "cuda":
        return "communication or waiting for the slowest rank, which whole-step timings cannot tell apart"
    return ("communication, waiting, or the ranks competing for the same CPU cores, which whole-step timings "
            "cannot tell apart")


def _step_times(base: BenchRow, last: BenchRow, unit: str) -> str:
    """The measured evidence: how long one step took at each end ("" without both times)."""
    if not base.step_time_s or not last.step_time_s:
        return ""
    return (f"; a step took {1000 * last.step_time_s:.0f} ms at {last.world_size} {unit} against "
            f"{1000 * base.step_time_s:.0f} ms at {base.world_size}")


def _scaling_sentence(rows: list[BenchRow], unit: str, device: str = "cpu") -> str | None:
    base = baseline(rows)
    if base is None:
        return None
    scaled = [r for r in rows if r.ok and r.speedup is not None and r.world_size > base.world_size]
    if not scaled:
        return f"only {base.world_size} rank{'s' if base.world_size != 1 else ''} measured: nothing to compare"
    facts = "; ".join(f"{r.world_size} {unit} give {r.speedup:.2f}x ({format_pct(r.efficiency)} efficient)"
                      for r in scaled)
    if base.world_size != 1:
        facts += f" (against {base.world_size})"
    last = scaled[-1]
    best = max([base, *scaled], key=lambda r: rate(r) or 0.0)
    lost, steps = _lost_to(device), _step_times(base, last, unit)
    if best is base and last.speedup < 1.0:
        tail = (f"more {unit} are slower than {base.world_size}{steps}; the extra time goes to {lost}; "
                f"stay at {base.world_size}, or raise the per-rank batch so each step computes more")
    elif best is not last:
        tail = (f"{last.world_size} {unit} are slower than {best.world_size}; "
                f"{best.world_size} {unit} are the sweet spot")
    elif last.efficiency >= GOOD_EFFICIENCY:
        tail = f"the extra {unit} pay off"
    elif last.efficiency >= FAIR_EFFICIENCY:
        tail = (f"the extra {unit} pay off only in part: {format_pct(1 - last.efficiency)} of the ideal speed-up "
                f"is lost{steps}; it goes to {lost}; a larger per-rank batch hides communication")
    else:
        tail = (f"the extra {unit} do not pay off: {format_pct(last.efficiency)} efficient{steps}; the time goes "
                f"to {lost}; raise the per-rank batch or use a faster backend")
    return f"{facts}: {tail}"


def _comparison_sentence(label: str, rows: list[BenchRow], base_rows: list[BenchRow], unit: str) -> str | None:
    ours = {r.world_size: r for r in rows if r.ok and rate(r)}
    theirs = {r.world_size: r for r in base_rows if r.ok and rate(r)}
    common = sorted(set(ours) & set(theirs))
    if not common:
        return None
    ws = common[-1]
    a, b = rate(ours[ws]), rate(theirs[ws])
    change = a / b - 1
    word = "faster" if change >= 0 else "slower"
    return f"with {label}: {a:.1f} samples/s at {ws} {unit}, {abs(100 * change):.0f}% {word} than {b:.1f}"


def verdict(rows: list[BenchRow], device: str = "cpu", workers: int | None = 0,
            cpu_cores: int | None = None, threads_per_rank: int = 1) -> str:
    """What the figures mean, in plain words; speedup and efficiency must be filled in."""
    if not rows:
        return "nothing was measured"
    unit = "GPUs" if device == "cuda" else "ranks"
    variants = list(dict.fromkeys(r.variant for r in rows))
    main = [r for r in rows if r.variant == variants[0]]
    sentences: list[str] = []
    waits = [r for r in main if r.ok and r.data_wait_fraction is not None and r.data_wait_fraction >= DATA_BOUND]
    if waits:  # the actionable finding goes first; the scaling figures follow as evidence
        worst = max(waits, key=lambda r: r.data_wait_fraction or 0.0)
        now = f" (now {workers})" if workers is not None else ""
        sentences.append(f"the data loader is the bottleneck: at {worst.world_size} {unit} each step waits "
                         f"{format_pct(worst.data_wait_fraction)} of its time for data; raise DataLoader "
                         f"workers{now}")
    scaling = _scaling_sentence(main, unit, device)
    sentences.append(scaling or "no world size finished its measured steps, so there is nothing to compare")
    low = [r for r in main if r.ok and r.gpu_util_pct is not None and r.gpu_util_pct < LOW_GPU_UTIL]
    if low:
        worst = min(low, key=lambda r: r.gpu_util_pct or 0.0)
        sentences.append(f"the GPUs are busy only {worst.gpu_util_pct:.0f}% of the time at {worst.world_size} "
                         f"{unit}: raise the batch size or the DataLoader workers")
    if device != "cuda" and cpu_cores:
        biggest = max(r.world_size for r in main)
        if biggest * threads_per_rank > cpu_cores:
            sentences.append(f"on the CPU, {biggest} ranks x {threads_per_rank} thread share {cpu_cores} cores, "
                             "so they compete for them; GPUs would scale differently")
    failed = [r for r in rows if r.state == "failed"]
    if failed:
        sentences.append("failed: " + "; ".join(f"{r.world_size} {unit} ({r.variant}): {r.error or 'see the log'}"
                                                for r in failed))
    for label in variants[1:]:
        sentence = _comparison_sentence(label, [r for r in rows if r.variant == label], main, unit)
        if sentence:
            sentences.append(sentence)
    text = ". ".join(s[0].upper() + s[1:] for s in sentences)
    return text + "."
