"""What a run measured, kept and read back (docs/history.md).

- ``rows``: the history file's format: one compact JSON array per measurement;
- ``history``: reading a run's history back (torn last line ignored), or
  deriving it from ``events.jsonl`` for runs older than the file;
- ``catalog``: every run folder with its facts and disk use, and deleting runs;
- ``compare``: curves of several runs on one x axis, threshold times, speedups;
- ``export``: the series as CSV or TensorBoard event files.
"""
