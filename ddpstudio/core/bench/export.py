"""The benchmark as a CSV file, a PNG bar chart (speedup against the ideal line), and a text table.

The chart is drawn with Pillow (already installed with torchvision), so
exporting needs neither Qt nor matplotlib.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ddpstudio.core.bench.analysis import format_duration, format_pct, format_speedup
from ddpstudio.core.bench.model import BenchResult, BenchRow

CSV_COLUMNS = ("variant", "world_size", "backend", "store", "batch_mode", "per_rank_batch", "effective_batch",
               "warmup", "steps", "samples_per_s", "speedup", "efficiency", "step_time_s", "step_time_median_s",
               "time_to_first_step_s", "data_wait_fraction", "gpu_util_pct", "steps_per_epoch", "epoch_time_s",
               "state", "error", "step_times_s")


def csv_record(row: BenchRow) -> dict[str, object]:
    out: dict[str, object] = {k: getattr(row, k) for k in CSV_COLUMNS if hasattr(row, k)}
    out["step_times_s"] = " ".join(f"{t:.6f}" for t in row.step_times)
    return {k: ("" if v is None else v) for k, v in out.items()}


def write_csv(result: BenchResult, path: str | Path) -> Path:
    """One line per (variant, world size); the raw step times go in the last column, space-separated."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in result.rows:
            writer.writerow(csv_record(row))
    return path


# -- text ------------------------------------------------------------------------

TABLE_HEADER = ("ranks", "batch/rank", "samples/s", "speedup", "efficiency", "step time", "first step",
                "epoch (est.)")


def table_cells(row: BenchRow) -> tuple[str, ...]:
    """One row of the table as the CLI prints it and the window may show it."""
    if not row.ok:
        return (str(row.world_size), str(row.per_rank_batch or "?"), row.state, "", "", "", "", "")
    sps = f"{row.samples_per_s:.1f}" if row.samples_per_s is not None else "n/a"
    step = f"{1000 * row.step_time_s:.0f} ms" if row.step_time_s is not None else "n/a"
    return (str(row.world_size), str(row.per_rank_batch or "?"), sps, format_speedup(row.speedup),
            format_pct(row.efficiency), step, format_duration(row.time_to_first_step_s),
            format_duration(row.epoch_time_s))


def format_table(result: BenchResult) -> str:
    lines: list[str] = []
    for variant in result.variants:
        cells = [TABLE_HEADER] + [table_cells(r) for r in result.rows_of(variant)]
        widths = [max(len(c[i]) for c in cells) for i in range(len(TABLE_HEADER))]
        lines.append(f"{variant}:")
        for i, c in enumerate(cells):
            lines.append("  " + "  ".join(cell.rjust(w) for cell, w in zip(c, widths)))
            if i == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- chart -----------------------------------------------------------------------

COLORS = ((47, 111, 186), (230, 126, 34), (39, 160, 96), (155, 89, 182))
IDEAL = (200, 40, 40)
INK, GRID, FAINT = (33, 33, 33), (225, 225, 225), (110, 110, 110)


def _font(size: int, bold: bool = False):
    from PIL import ImageFont

    for name in (("DejaVuSans-Bold.ttf", "arialbd.ttf") if bold else ("DejaVuSans.ttf", "arial.ttf")):
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default(size=size)


def _nice_top(value: float) -> tuple[float, float]:
    """An axis top at or above ``value`` and a tick step giving 4-8 ticks."""
    for step in (0.25, 0.5, 1, 2, 5, 10, 20, 50):
        top = step * -(-value // step)
        if top / step <= 8:
            return top, step
    return value, value / 5


def machine_summary(machine: dict) -> str:
    """"4 x NVIDIA RTX A5000" or "CPU, 2 cores"."""
    names = machine.get("gpus") or []
    if not names:
        return f"CPU, {machine.get('cpu_cores')} cores"
    counts = dict.fromkeys(names, 0)
    for name in names:
        counts[name] += 1
    return " + ".join(f"{n} x {name}" if n > 1 else name for name, n in counts.items())


def _subtitle(result: BenchResult) -> str:
    s = result.settings
    what = s.get("model") or Path(str(s.get("script") or "script")).name
    batch = s.get("batch_size")
    where = machine_summary(result.machine)
    parts = [str(what), f"batch {batch} per rank" if batch and s.get("batch_mode") == "per-rank"
             else f"batch {batch} split" if batch else "", f"{s.get('steps')} measured steps", where]
    return " | ".join(p for p in parts if p)


def write_png(result: BenchResult, path: str | Path, size: tuple[int, int] = (1000, 620)) -> Path:
    """Grouped bars of speedup per world size (one colour per variant) with the ideal, linear, line."""
    from PIL import Image, ImageDraw

    W, H = size
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    title_f, label_f, small_f = _font(22, bold=True), _font(15), _font(13)
    left, right, top, bottom = 80, 30, 96, 80
    pw, ph = W - left - right, H - top - bottom

    d.text((left, 18), "Speedup by number of ranks", font=title_f, fill=INK)
    d.text((left, 50), _subtitle(result), font=small_f, fill=FAINT)

    variants = result.variants or ["(no runs)"]
    sizes = sorted({r.world_size for r in result.rows}) or [1]
    base = min(sizes)
    ideal = {ws: ws / base for ws in sizes}
    highest = max([*ideal.values(), *(r.speedup or 0 for r in result.rows)], default=1.0)
    ymax, ystep = _nice_top(highest * 1.12)

    def y_of(v: float) -> float:
        return top + ph - ph * v / ymax

    # grid and y axis
    v = 0.0
    while v <= ymax + 1e-9:
        y = y_of(v)
        d.line([(left, y), (left + pw, y)], fill=GRID, width=1)
        text = f"{v:g}x"
        w = d.textlength(text, font=small_f)
        d.text((left - 8 - w, y - 8), text, font=small_f, fill=FAINT)
        v += ystep
    d.line([(left, top), (left, top + ph)], fill=INK, width=2)
    d.line([(left, top + ph), (left + pw, top + ph)], fill=INK, width=2)

    # bars (labels wait until the ideal line is drawn, so they stay on top)
    slot = pw / len(sizes)
    bar_w = min(slot * 0.7 / len(variants), 150)
    group_w = bar_w * len(variants)
    centers, labels = {}, []
    for i, ws in enumerate(sizes):
        cx = left + slot * (i + 0.5)
        centers[ws] = cx
        label = f"{ws} rank{'s' if ws != 1 else ''}"
        d.text((cx - d.textlength(label, font=label_f) / 2, top + ph + 8), label, font=label_f, fill=INK)
        first = next((r for r in result.rows if r.variant == variants[0] and r.world_size == ws), None)
        if first is not None and first.samples_per_s is not None and len(variants) == 1:
            rate = f"{first.samples_per_s:.1f} samples/s"
            d.text((cx - d.textlength(rate, font=small_f) / 2, top + ph + 30), rate, font=small_f, fill=FAINT)
        for j, variant in enumerate(variants):
            row = next((r for r in result.rows if r.variant == variant and r.world_size == ws), None)
            if row is None:
                continue
            x0 = cx - group_w / 2 + j * bar_w + 2
            x1 = x0 + bar_w - 4
            if row.speedup is None:
                labels.append(((x0 + x1) / 2, top + ph - 22, row.state if not row.ok else "n/a", label_f, IDEAL))
                continue
            y = y_of(row.speedup)
            d.rectangle([x0, y, x1, top + ph - 1], fill=COLORS[j % len(COLORS)])
            labels.append(((x0 + x1) / 2, y - 24, format_speedup(row.speedup), label_f, INK))
            if top + ph - y > 26:
                labels.append(((x0 + x1) / 2, y + 6, format_pct(row.efficiency), small_f, "white"))

    # the ideal line: linear speedup, dashed, through every group's centre
    points = [(centers[ws], y_of(ideal[ws])) for ws in sizes]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        steps = max(1, int(((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5 // 12))
        for k in range(0, steps, 2):
            a, b = k / steps, min(1.0, (k + 1) / steps)
            d.line([(x0 + (x1 - x0) * a, y0 + (y1 - y0) * a), (x0 + (x1 - x0) * b, y0 + (y1 - y0) * b)],
                   fill=IDEAL, width=3)
    for x, y in points:
        d.ellipse([x - 4, y - 4, x + 4, y + 4], fill=IDEAL)

    for x, y, text, font, color in labels:
        w = d.textlength(text, font=font)
        if color == INK:  # above a bar: a white patch keeps it readable over the ideal line
            d.rectangle([x - w / 2 - 3, y, x + w / 2 + 3, y + 19], fill="white")
        d.text((x - w / 2, y), text, font=font, fill=color)
    d.text((left - 8 - d.textlength("speedup", font=small_f) / 2, top - 24), "speedup", font=small_f, fill=FAINT)

    # legend, top left inside the plot
    entries = [(COLORS[j % len(COLORS)], v, "bar") for j, v in enumerate(variants)]
    entries.append((IDEAL, "ideal (linear) speedup", "line"))
    lw = max(d.textlength(text, font=small_f) for _, text, _ in entries) + 44
    lh = 20 * len(entries) + 12
    lx, ly = left + 14, top + 10
    d.rectangle([lx, ly, lx + lw, ly + lh], fill="white", outline=GRID)
    for k, (color, text, kind) in enumerate(entries):
        y = ly + 8 + 20 * k
        if kind == "bar":
            d.rectangle([lx + 8, y + 2, lx + 26, y + 14], fill=color)
        else:
            d.line([(lx + 8, y + 8), (lx + 26, y + 8)], fill=color, width=3)
        d.text((lx + 34, y), text, font=small_f, fill=INK)

    d.text((left, H - 24), "speedup: samples/s over that of the smallest world size; "
                           "inside each bar: scaling efficiency", font=small_f, fill=FAINT)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, format="PNG")
    return path
