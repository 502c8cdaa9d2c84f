"""The scaling benchmark (issue 6), Qt-free: see docs/bench.md.

    result = run_benchmark(BenchConfig(request), on_progress=print)
    result.rows, result.verdict, result.to_dict()
    export.write_csv(result, "bench.csv"); export.write_png(result, "bench.png")
"""

from .model import BenchConfig, BenchProgress, BenchResult, BenchRow
from .runner import Benchmark, run_benchmark

__all__ = ["BenchConfig", "BenchProgress", "BenchResult", "BenchRow", "Benchmark", "run_benchmark"]
