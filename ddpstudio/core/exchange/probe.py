"""Can Gloo all-reduce CUDA tensors on this machine? Asked of a child process, cached per key.

The answer is an :class:`Outcome`: ``native`` (the all-reduce gave the right
numbers on every GPU), ``crashes`` (it did not complete: the child died,
hung past the timeout, or raised), ``wrong`` (it completed with wrong
numbers), ``not applicable`` (no CUDA here; with a CPU-only torch build that
is known without a child). Only ``native`` is safe for
gradients on the GPU. The child (:mod:`probe_child`) may die of the very
thing it tests (pytorch #186535), so it never runs in the caller's process.

The result is cached in the data folder under a key of torch version + CUDA
build, driver version and GPU set; a changed key means "never probed".
:func:`cached_outcome` reads it without importing torch (the gradient
exchange's ``auto`` asks it before every run). ``python -m
ddpstudio.core.exchange.probe [--force]`` probes and prints the result as one
JSON line (the installer's first-run setup runs this in the new environment).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Sequence

from ddpstudio.core import atomic, paths
from ddpstudio.core.exchange.probe_child import MARKER
from ddpstudio.core.exchange.probekey import ProbeKey, cpu_only_build, current_key
from ddpstudio.core.platform import SAFE_PATH, Platform, current
from ddpstudio.core.process.exitcodes import describe_exit
from ddpstudio.core.process.proctree import popen_options
from ddpstudio.core.rendezvous.asciipath import safe_temp_folder

# MARKER prefixes the child's lines; the same prefix marks the command line's JSON result.
CHILD_ENV = "DDPSTUDIO_PROBE_CHILD"  # tests only: a JSON list, the child command to run instead
CACHE_NAME = "gloo_cuda_all_reduce.json"
# First CUDA use on Windows can take tens of seconds (driver JIT, antivirus scanning DLLs).
TIMEOUT_S = 180.0
ISSUE = "pytorch #186535"


class Outcome(StrEnum):
    NATIVE = "native"
    CRASHES = "crashes"
    WRONG = "wrong"
    NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class GpuResult:
    index: int
    name: str
    outcome: Outcome
    detail: str = ""


@dataclass(frozen=True)
class ProbeResult:
    outcome: Outcome
    detail: str  # one plain sentence: what happened
    key: ProbeKey
    t: float  # when it ran (time.time())
    duration_s: float
    gpus: tuple[GpuResult, ...] = ()
    exit: str = ""  # how the child ended, in words ("killed by SIGSEGV", "hung after 180 s")
    hung: bool = False
    output_tail: tuple[str, ...] = field(default=(), compare=False)

    @property
    def safe(self) -> bool:
        """Whether gradients may be all-reduced on the GPU with Gloo."""
        return self.outcome is Outcome.NATIVE

    def sentence(self) -> str:
        """One plain sentence for the doctor and the window."""
        if self.outcome is Outcome.NATIVE:
            return "Gloo all-reduces GPU tensors correctly here: gradients stay on the GPU"
        if self.outcome is Outcome.NOT_APPLICABLE:
            return "No CUDA GPU: gradients are all-reduced on the CPU anyway"
        what = {Outcome.CRASHES: "hung" if self.hung else "crashed",
                Outcome.WRONG: "gave wrong sums"}[self.outcome]
        return f"GPU gradients go through the CPU: Gloo {what} all-reducing CUDA tensors here ({ISSUE})"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["key"] = self.key.to_dict()
        data["gpus"] = [dict(asdict(g), outcome=str(g.outcome)) for g in self.gpus]
        data["outcome"] = str(self.outcome)
        data["output_tail"] = list(self.output_tail)
        data["sentence"] = self.sentence()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        return cls(outcome=Outcome(data["outcome"]), detail=str(data.get("detail", "")),
                   key=ProbeKey.from_dict(data["key"]), t=float(data["t"]),
                   duration_s=float(data.get("duration_s", 0.0)),
                   gpus=tuple(GpuResult(int(g["index"]), str(g["name"]), Outcome(g["outcome"]),
                                        str(g.get("detail", ""))) for g in data.get("gpus", ())),
                   exit=str(data.get("exit", "")), hung=bool(data.get("hung", False)),
                   output_tail=tuple(data.get("output_tail", ())))


# -- the cache ---------------------------------------------------------------------------
def cache_path() -> Path:
    return paths.data_dir() / "probe" / CACHE_NAME


def cached_result(key: ProbeKey | None = None) -> ProbeResult | None:
    """The stored result if it was taken under ``key`` (default: this machine's key now)."""
    try:
        stored = ProbeResult.from_dict(json.loads(cache_path().read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return stored if stored.key == (key if key is not None else current_key()) else None


def cached_outcome() -> str | None:
    """The cached outcome for this machine's current key, without running anything;
    None when never probed or when torch, the driver or the GPUs changed since."""
    result = cached_result()
    return None if result is None else str(result.outcome)


def invalidate() -> None:
    """Drops the cached result: the next :func:`probe` runs the child again."""
    cache_path().unlink(missing_ok=True)


def store(result: ProbeResult) -> bool:
    """Cache ``result``; False when the data folder cannot take it (full or read-only): it is re-run next time."""
    try:
        atomic.write_json(cache_path(), result.to_dict())
    except OSError:
        return False
    return True


def probe(force: bool = False, timeout_s: float = TIMEOUT_S) -> ProbeResult:
    """The cached result for this machine's key, or (when there is none, or ``force``) a fresh one, stored."""
    key = current_key()
    if not force:
        cached = cached_result(key)
        if cached is not None:
            return cached
    result = no_cuda_build(key) if cpu_only_build() else run(key=key, timeout_s=timeout_s)
    store(result)
    return result


def no_cuda_build(key: ProbeKey) -> ProbeResult:
    """The answer for a torch built without CUDA (PyPI's Windows wheels): known without a child, whose
    torch import alone costs seconds (tens under Wine) and whose answer could only be this one."""
    return ProbeResult(Outcome.NOT_APPLICABLE, f"this PyTorch ({key.torch}) is a CPU-only build: "
                                               "it cannot use a CUDA GPU, so there is nothing to check",
                       key=key, t=time.time(), duration_s=0.0, exit="not started: nothing to check")


# -- running the child --------------------------------------------------------------------
def child_command() -> list[str]:
    """The child to run: ``DDPSTUDIO_PROBE_CHILD`` (tests) or this interpreter with :mod:`probe_child`."""
    override = os.environ.get(CHILD_ENV)
    if override:
        return list(json.loads(override))
    return [sys.executable, SAFE_PATH, "-m", "ddpstudio.core.exchange.probe_child"]


def run(command: Sequence[str] | None = None, key: ProbeKey | None = None, timeout_s: float = TIMEOUT_S,
        platform: Platform | None = None) -> ProbeResult:
    """Runs the child once (``command`` + a fresh store path) and classifies how it went; stores nothing."""
    platform = platform or current()
    key = key if key is not None else current_key()
    # Fresh, never reused (pytorch #55967), in a folder torch's narrow open() can reach on Windows.
    folder = safe_temp_folder("ddpstudio-probe-", platform)
    store_path = os.path.join(folder, "store")
    started, t = time.monotonic(), time.time()
    try:
        proc = subprocess.Popen([*(command or child_command()), store_path], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                encoding="utf-8", errors="replace", **popen_options(platform))
        hung = False
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            hung = True
            _kill_tree(proc)
            output, _ = proc.communicate()
        return classify(output, proc.returncode, hung, timeout_s, key, t, time.monotonic() - started, platform)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kill_tree(proc: subprocess.Popen) -> None:
    """The child and anything it started (a venv launcher on Windows starts the real interpreter)."""
    import psutil  # only on the rare hang path

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        children = []
    for victim in children:
        try:
            victim.kill()
        except psutil.Error:
            pass
    proc.kill()


def classify(output: str, returncode: int | None, hung: bool, timeout_s: float, key: ProbeKey, t: float,
             duration_s: float, platform: Platform) -> ProbeResult:
    """The result that the child's lines and its end add up to."""
    events, others = _parse(output)
    exit_text = f"hung after {timeout_s:g} s" if hung else describe_exit(returncode, platform)
    cuda = next((e for e in events if e.get("event") == "cuda"), None)
    gpus = _gpu_results(events, exit_text)
    tail = tuple(others[-15:])
    made = dict(key=key, t=t, duration_s=round(duration_s, 3), gpus=gpus, exit=exit_text, hung=hung,
                output_tail=tail)
    if cuda is not None and not cuda.get("available") and not hung:
        return ProbeResult(Outcome.NOT_APPLICABLE, "torch sees no CUDA GPU", **made)
    failed = [g for g in gpus if g.outcome is Outcome.CRASHES]
    if hung or returncode != 0 or cuda is None:
        where = f" while all-reducing on GPU {failed[0].index} ({failed[0].name})" if failed else ""
        last = f"; last output: {tail[-1]}" if tail else ""
        return ProbeResult(Outcome.CRASHES, f"the probe process {_verb(exit_text)}{where}{last}", **made)
    if failed:
        return ProbeResult(Outcome.CRASHES, f"the all-reduce failed on GPU {failed[0].index}: {failed[0].detail}",
                           **made)
    wrong = [g for g in gpus if g.outcome is Outcome.WRONG]
    if wrong:
        return ProbeResult(Outcome.WRONG, f"the all-reduce gave wrong numbers on GPU {wrong[0].index}: "
                                          f"{wrong[0].detail}", **made)
    if len(gpus) < int(cuda.get("count") or 0):
        return ProbeResult(Outcome.CRASHES, f"the probe stopped after {len(gpus)} of {cuda.get('count')} GPUs",
                           **made)
    return ProbeResult(Outcome.NATIVE, f"all-reduce correct on {len(gpus)} GPU(s)", **made)


def _verb(exit_text: str) -> str:
    return exit_text if exit_text.startswith(("hung", "killed", "crashed")) else f"ended with {exit_text}"


def _parse(output: str) -> tuple[list[dict[str, Any]], list[str]]:
    events, others = [], []
    for line in (output or "").splitlines():
        if line.startswith(MARKER):
            try:
                events.append(json.loads(line[len(MARKER):]))
                continue
            except ValueError:
                pass
        if line.strip():
            others.append(line.rstrip())
    return events, others


def _gpu_results(events: list[dict[str, Any]], exit_text: str) -> tuple[GpuResult, ...]:
    results: dict[int, GpuResult] = {}
    for ev in events:
        index = int(ev.get("gpu", -1))
        if ev.get("event") == "start":
            # Started and never finished: this is the GPU the child died on.
            results[index] = GpuResult(index, str(ev.get("name", "")), Outcome.CRASHES, exit_text)
        elif ev.get("event") == "error" and index in results:
            results[index] = GpuResult(index, results[index].name, Outcome.CRASHES, str(ev.get("message", "")))
        elif ev.get("event") == "done" and index in results:
            ok = bool(ev.get("ok"))
            results[index] = GpuResult(index, results[index].name, Outcome.NATIVE if ok else Outcome.WRONG,
                                       "" if ok else f"expected {ev.get('expected')}, got {ev.get('value')}")
    return tuple(results[i] for i in sorted(results))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ddpstudio.core.exchange.probe [--force]``: probe (or reuse the cache), print one JSON line."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ddpstudio.core.exchange.probe")
    parser.add_argument("--force", action="store_true", help="probe again even if a result is cached")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds before a hung probe is cut off")
    args = parser.parse_args(argv)
    result = probe(force=args.force, timeout_s=args.timeout)
    print(MARKER + json.dumps(result.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
