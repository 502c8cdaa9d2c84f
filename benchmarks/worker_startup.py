"""What DataLoader worker processes cost to start, with fork and with spawn (Windows' only start method).

    .venv/bin/python benchmarks/worker_startup.py [--workers 1,2] [--rounds 3]

For the recipe's synthetic data and a small image folder, times from
``iter(loader)`` to the first batch (the workers start, import what the
dataset needs, unpickle it and load a batch), then the first batch of a
second pass over the same loader with ``persistent_workers=True`` (the next
epoch: nothing starts again). The recipe's worker choice (core/workers.py)
counts on this: the start-up is paid once per rank per run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _folder(root: Path, images: int = 64, size: int = 64) -> Path:
    from PIL import Image

    for i in range(images):
        folder = root / f"class{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (size, size), (i * 3 % 255, 40, 90)).save(folder / f"{i}.png")
    return root


def _dataset(kind: str, folder: Path):
    from ddpstudio.core.plan import RecipeSpec
    from ddpstudio.rank.data import build_dataset

    spec = RecipeSpec(data=kind, data_dir=str(folder) if kind == "folder" else None, image_size=32)
    return build_dataset(spec)[0]


def first_batches(kind: str, folder: Path, workers: int, method: str) -> tuple[float, float]:
    """(seconds to the first batch of a fresh loader, seconds to the first batch of its second pass)."""
    from torch.utils.data import DataLoader

    loader = DataLoader(_dataset(kind, folder), batch_size=16, shuffle=True, num_workers=workers,
                        multiprocessing_context=method, persistent_workers=True)
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    start = time.perf_counter() - t0
    for _ in it:
        pass
    t1 = time.perf_counter()
    next(iter(loader))
    again = time.perf_counter() - t1
    del it, loader
    return start, again


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = _folder(Path(tmp) / "images")
        for kind in ("synthetic", "folder"):
            for method in ("fork", "spawn"):
                for workers in (int(w) for w in args.workers.split(",")):
                    runs = [first_batches(kind, folder, workers, method) for _ in range(args.rounds)]
                    rows.append((kind, method, workers, statistics.median(r[0] for r in runs),
                                 statistics.median(r[1] for r in runs)))
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"median of {args.rounds}\n")
    print("| dataset | start method | workers | first batch (workers start) | next epoch's first batch |")
    print("|---|---|---|---|---|")
    for kind, method, workers, start, again in rows:
        print(f"| {kind} | {method} | {workers} | {start:.2f} s | {again * 1000:.0f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
