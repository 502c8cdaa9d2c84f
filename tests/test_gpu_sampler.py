"""Sampler: the real source (this machine's GPUs or none) with a real process, fake GPUs, prompt stop."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from ddpstudio.core.gpu import FakeGpuSource, NvmlSource, Sampler, Snapshot
from tests import machine

FAKE = {
    "gpus": [
        {"name": "NVIDIA RTX A6000", "total_memory_mb": 49140, "compute_capability": "8.6",
         "utilization_pct": 88, "memory_used_mb": 30000, "power_w": 250},
        {"name": "NVIDIA RTX A6000", "total_memory_mb": 49140, "compute_capability": "8.6",
         "utilization_pct": 91, "memory_used_mb": 30500, "temperature_c": 70},
    ],
}


class Waiter:
    """An on_snapshot callback that records snapshots and wakes a test when a condition holds."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self._cond = threading.Condition()

    def __call__(self, snapshot: Snapshot) -> None:
        with self._cond:
            self.snapshots.append(snapshot)
            self._cond.notify_all()

    def until(self, predicate, timeout: float = 15.0, since: int = 0) -> Snapshot:
        """The first snapshot (from number ``since`` on) for which ``predicate`` holds;
        fails at the deadline."""
        with self._cond:
            start = since
            found = self._cond.wait_for(lambda: any(predicate(s) for s in self.snapshots[start:]), timeout)
            assert found, f"no snapshot matched within {timeout}s; last: {self.snapshots[-1:]}"
            return next(s for s in self.snapshots[start:] if predicate(s))


@pytest.fixture
def busy_child():
    """A real process spinning one core; killed afterwards, and checked gone."""
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield child
    child.kill()
    child.wait(timeout=10)
    assert not psutil.pid_exists(child.pid)
    assert not psutil.Process().children(recursive=True)


@pytest.fixture
def sampler_factory():
    """Builds samplers and stops every one of them, even when the test fails."""
    made: list[Sampler] = []

    def make(**kwargs) -> Sampler:
        made.append(Sampler(**kwargs))
        return made[-1]

    yield make
    for sampler in made:
        sampler.stop()
        assert not sampler.running


@pytest.mark.real_gpus
def test_the_real_source_measures_a_real_busy_process_and_drops_it_when_gone(busy_child, sampler_factory):
    """NVML's devices in every snapshot where the driver has some ("gpu" mode), none here ("cpu" mode);
    the watched process is measured either way."""
    gpus = machine.nvml_answer().names
    waiter = Waiter()
    sampler = sampler_factory(source=NvmlSource(), interval_s=0.2, on_snapshot=waiter)
    sampler.set_pids([busy_child.pid])
    sampler.start()

    def busy(s: Snapshot) -> bool:
        p = s.process(busy_child.pid)
        return p is not None and p.cpu_pct > 0

    snapshot = waiter.until(busy)
    assert snapshot.mode == ("gpu" if gpus else "cpu") and tuple(g.name for g in snapshot.gpus) == gpus
    assert all(g.memory_total_mb and g.memory_used_mb is not None for g in snapshot.gpus)
    assert snapshot.process(busy_child.pid).rss_mb > 1
    assert sampler.latest is not None and sampler.latest.t >= snapshot.t

    busy_child.kill()
    busy_child.wait(timeout=10)  # reaped, so the pid no longer exists (not even as a zombie)
    after_kill = len(waiter.snapshots)
    waiter.until(lambda s: s.process(busy_child.pid) is None, since=after_kill)  # dropped, no error


def test_fake_gpus_give_two_samples_per_snapshot_and_follow_updates(sampler_factory):
    source = FakeGpuSource.from_dict(FAKE)
    waiter = Waiter()
    sampler = sampler_factory(source=source, interval_s=0.05, on_snapshot=waiter)
    sampler.set_pids([os.getpid()])
    sampler.start()
    snapshot = waiter.until(lambda s: len(waiter.snapshots) >= 3)
    assert snapshot.mode == "gpu" and len(snapshot.gpus) == 2
    assert [g.utilization_pct for g in snapshot.gpus] == [88.0, 91.0]
    assert snapshot.gpus[0].temperature_c is None and snapshot.gpus[1].power_w is None  # "not available"
    assert [p.pid for p in snapshot.processes] == [os.getpid()]

    source.update(0, utilization_pct=12)
    sampler.set_pids([])
    snapshot = waiter.until(lambda s: s.gpus[0].utilization_pct == 12.0 and not s.processes)
    assert snapshot.gpus[1].utilization_pct == 91.0


def test_stop_returns_within_one_second_even_with_a_long_interval(sampler_factory):
    waiter = Waiter()
    sampler = sampler_factory(source=FakeGpuSource.from_dict(FAKE), interval_s=30, on_snapshot=waiter)
    sampler.start()
    waiter.until(lambda s: True)  # the first snapshot comes at once, then it waits 30 s
    started = time.monotonic()
    sampler.stop()
    assert time.monotonic() - started < 1.0
    assert not sampler.running


class BrokenSource(FakeGpuSource):
    def sample(self, pids=None):
        raise RuntimeError("a source with a bug")


def test_a_failing_source_or_callback_does_not_stop_sampling(sampler_factory):
    seen = Waiter()

    def callback(snapshot: Snapshot) -> None:
        seen(snapshot)
        raise RuntimeError("a slot with a bug")

    sampler = sampler_factory(source=BrokenSource(), interval_s=0.05, on_snapshot=callback)
    sampler.start()
    snapshot = seen.until(lambda s: len(seen.snapshots) >= 3)
    assert snapshot.mode == "cpu" and snapshot.gpus == ()
    assert sampler.running


def test_sample_once_skips_a_process_that_has_exited():
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    assert finished.wait(timeout=30) == 0
    gone_pid = finished.pid  # reaped: nothing runs under this pid now
    sampler = Sampler(source=FakeGpuSource(), interval_s=1)
    sampler.set_pids([gone_pid, os.getpid()])
    snapshot = sampler.sample_once()
    assert snapshot.mode == "cpu"
    assert [p.pid for p in snapshot.processes] == [os.getpid()]
    assert sampler.latest is snapshot
    assert not psutil.Process().children(recursive=True)


def test_interval_must_be_positive():
    with pytest.raises(ValueError):
        Sampler(source=FakeGpuSource(), interval_s=0)
