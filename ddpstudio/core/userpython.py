"""The Python a user's script runs in when it is not DDP Studio's own (``--python``, the window's Python field).

A script that needs timm, transformers or its own packages usually has them in
an environment of its own (a venv, a conda env). Its ranks then run in that
environment's interpreter, checked before any rank starts: it must run, be
Python 3, import torch, and (for a run on the GPUs) have a CUDA build of it.
The check starts the interpreter once and imports torch there (seconds), so its
result is kept per interpreter file until that file changes; a failed check is
never kept, so installing torch and checking again works.

The rank helper needs DDP Studio's own package, which that environment lacks:
the ranks get ``DDPSTUDIO_PACKAGE_DIR`` (the folder holding the ``ddpstudio``
package), and the helper finds ``ddpstudio`` there and nothing else of DDP
Studio's environment (its torch stays out of the script's way).
"""

from __future__ import annotations

import json
import ntpath
import os
import posixpath
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core import cmdline
from ddpstudio.core.platform import Platform

PACKAGE_DIR_ENV = "DDPSTUDIO_PACKAGE_DIR"
HELPER_MIN = (3, 10)  # the oldest Python the rank helper's modules run in (they are tested on 3.11)
CHECK_TIMEOUT_S = 120.0  # importing torch the first time after a boot can take a minute on Windows
MARKER = "DDPSTUDIO-PYTHON "

# Runs in the user's interpreter: any Python, 2.7 included, so an old one is named rather than failing obscurely.
_CHECK = r"""
import json, sys
out = {"version": list(sys.version_info[:3]), "executable": sys.executable, "prefix": sys.prefix,
       "base_prefix": getattr(sys, "base_prefix", sys.prefix),
       "base_executable": getattr(sys, "_base_executable", sys.executable)}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
except Exception as exc:
    out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write("DDPSTUDIO-PYTHON " + json.dumps(out) + "\n")
"""


class UserPythonError(ValueError):
    """The interpreter cannot run the script's ranks; the message says what to do instead."""


@dataclass(frozen=True)
class PythonFacts:
    """What the check found in the interpreter."""

    path: str  # the interpreter file checked
    version: tuple[int, ...]
    prefix: str
    base_prefix: str
    base_executable: str
    torch: str | None = None
    cuda: str | None = None  # torch.version.cuda; None for a CPU-only build
    torch_error: str | None = None

    @property
    def in_venv(self) -> bool:
        return self.prefix != self.base_prefix

    @property
    def version_text(self) -> str:
        return ".".join(str(v) for v in self.version)

    def reason(self, helper: bool = True) -> str:
        """The plan's line; ``helper``: whether the rank helper runs (from DDP Studio's folder) in the ranks."""
        cuda = f", CUDA {self.cuda}" if self.cuda else ", CPU-only"
        return (f"your script runs in {self.path} (Python {self.version_text}, torch {self.torch}{cuda}), not DDP "
                "Studio's own Python; " + ("the rank helper comes from DDP Studio's folder, nothing else of its "
                                          "environment" if helper else "nothing of DDP Studio's environment"))


def problem(facts: PythonFacts, *, needs_cuda: bool, helper: bool, platform: Platform | None = None) -> str | None:
    """Why ``facts``' interpreter cannot run this run's ranks, in one line; ``None`` when it can (its command
    lines quoted for ``platform``'s console)."""
    where = facts.path
    if facts.version[0] < 3:
        return (f"{where} is Python {facts.version_text}; PyTorch needs Python 3: choose the python of an "
                "environment with PyTorch, or leave Python empty to use DDP Studio's own")
    if facts.torch is None:
        return (f"{where} (Python {facts.version_text}) cannot import torch ({facts.torch_error}): install PyTorch "
                f"there ({cmdline.pip_install_line(where, 'torch', platform)}), or leave Python empty to use DDP "
                "Studio's own, which has it")
    if helper and tuple(facts.version[:2]) < HELPER_MIN:
        oldest = ".".join(map(str, HELPER_MIN))
        return (f"{where} is Python {facts.version_text}; DDP Studio's rank helper (its reports, the Windows "
                f"gradient exchange) runs in Python {oldest} or newer: use an environment with Python {oldest}+, "
                "or turn the rank helper off (--no-rank-helper)")
    if needs_cuda and facts.cuda is None:
        return (f"the torch in {where} ({facts.torch}) is a CPU-only build, and this run trains on the GPUs: "
                "install a CUDA build of PyTorch there (pytorch.org lists the command), or choose the CPU")
    return None


def resolve(given: str, platform: Platform) -> str:
    """The interpreter file for what the user gave: the file itself, or the python of an environment folder
    (a venv's ``Scripts\\python.exe`` or ``bin/python``, a conda env's ``python.exe``)."""
    path = os.path.expanduser(given.strip())
    if not path:
        raise UserPythonError("Python: give the python of the environment your script needs, or leave it empty")
    if not os.path.exists(path):
        raise UserPythonError(f"Python: there is no {path}; give the python{'.exe' if platform.is_windows else ''} "
                              "of the environment your script needs, or leave Python empty to use DDP Studio's own")
    if os.path.isdir(path):
        names = (["python.exe", ntpath.join("Scripts", "python.exe")] if platform.is_windows
                 else [posixpath.join("bin", "python"), posixpath.join("bin", "python3")])
        for name in names:
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return os.path.abspath(candidate)
        raise UserPythonError(f"Python: {path} is a folder without {' or '.join(names)} in it; give the "
                              "environment's python file itself")
    return os.path.abspath(path)


_checked: dict[tuple[str, int, int], PythonFacts] = {}


def check(given: str, platform: Platform, *, needs_cuda: bool, helper: bool,
          timeout: float = CHECK_TIMEOUT_S) -> PythonFacts:
    """Start the interpreter once (or reuse its last good check) and say whether it can run the ranks;
    raises :class:`UserPythonError` with the reason when it cannot."""
    from ddpstudio.core.launch.commands import console_python

    path = console_python(resolve(given, platform), platform)  # pythonw.exe: the ranks want python.exe beside it
    stat = os.stat(path)
    key = (os.path.normcase(path), stat.st_mtime_ns, stat.st_size)
    facts = _checked.get(key) or _run_check(path, platform, timeout)
    said = problem(facts, needs_cuda=needs_cuda, helper=helper, platform=platform)
    if said:
        _checked.pop(key, None)
        raise UserPythonError(said)
    _checked[key] = facts
    return facts


def _run_check(path: str, platform: Platform, timeout: float) -> PythonFacts:
    from ddpstudio.core.process.proctree import CREATE_NO_WINDOW

    options = {"creationflags": CREATE_NO_WINDOW} if platform.is_windows else {}
    try:
        done = subprocess.run([path, "-c", _CHECK], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, encoding="utf-8", errors="replace", **options)
    except subprocess.TimeoutExpired:
        raise UserPythonError(f"Python: {path} did not answer within {timeout:.0f} s (it was asked to import "
                              "torch); try again, or check that it starts from a terminal") from None
    except OSError as exc:
        raise UserPythonError(f"Python: {path} cannot be started ({exc.strerror or exc}); give a python "
                              "interpreter file") from None
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(MARKER)), None)
    if line is None:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserPythonError(f"Python: {path} did not run as Python (exit code {done.returncode}: {last}); "
                              "give a python interpreter file")
    raw = json.loads(line[len(MARKER):])
    return PythonFacts(path=path, version=tuple(raw["version"]), prefix=raw["prefix"],
                       base_prefix=raw["base_prefix"], base_executable=raw["base_executable"] or path,
                       torch=raw.get("torch"), cuda=raw.get("cuda"), torch_error=raw.get("torch_error"))


def active_environment_note(environ: dict[str, str], prefix: str, platform: Platform) -> str | None:
    """A plan line for a script started from an activated environment (a venv's ``VIRTUAL_ENV``, conda's
    ``CONDA_PREFIX``) that is not DDP Studio's own: its ranks would not run there unless told so."""
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        active = environ.get(variable, "").strip()
        if not active or _same_folder(active, prefix, platform):
            continue
        join = ntpath.join if platform.is_windows else posixpath.join
        python = (join(active, "Scripts", "python.exe") if platform.is_windows and variable == "VIRTUAL_ENV"
                  else join(active, "python.exe") if platform.is_windows else join(active, "bin", "python"))
        return (f"the environment {active} is active ({variable}), but your script's ranks run in DDP Studio's "
                f"own Python; to run them in that environment, give --python {cmdline.quote(python, platform)} "
                "(the window: Python)")
    return None


def _same_folder(a: str, b: str, platform: Platform) -> bool:
    if platform.is_windows:
        return ntpath.normcase(ntpath.normpath(a)) == ntpath.normcase(ntpath.normpath(b))
    return os.path.realpath(a) == os.path.realpath(b)


def package_dir() -> str:
    """The folder that holds DDP Studio's ``ddpstudio`` package (for the rank helper in another Python)."""
    return str(Path(__file__).resolve().parents[2])
