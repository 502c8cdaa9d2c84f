"""Where an export writes (a CSV, a chart, a job script, a TensorBoard folder): checked before any work, and
the write's own failure said in one line (issue 27: ``/proc/x.csv``, a read-only folder and a path that is a
folder ended in tracebacks)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def file_problem(path: str | os.PathLike, what: str) -> str | None:
    """Why the file ``path`` cannot be written (``what`` names it: "the CSV file"), or ``None``.

    Its folder must exist (it is never created) and take a new file: probed with a temporary file,
    which also catches a read-only disk and folders such as /proc that refuse new files to everyone.
    """
    target = Path(path).expanduser()
    if target.is_dir():
        return f"{what} {target} is a folder; give a file name in it"
    folder = target.absolute().parent
    if not folder.is_dir():
        return f"the folder of {what} {target} does not exist: create it or choose another file"
    if target.exists() and not os.access(target, os.W_OK):
        return f"{what} {target} cannot be written (it is read-only); choose another file"
    return _probe(folder, f"{what} {target}")


def _probe(folder: Path, named: str) -> str | None:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"{named} cannot be written in {folder} ({exc.strerror or exc}); choose a folder you can write to"
    return None


def write_failure(path: str | os.PathLike, exc: OSError) -> str:
    """One line for a write that failed after the check (the disk filled up, the folder went away)."""
    return f"could not write {path}: {exc.strerror or exc}; choose another place"
