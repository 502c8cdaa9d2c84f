"""Builds the app's environment: the one job of the bootstrap, step by step.

Check the computer (files, driver, disk) -> choose the PyTorch build ->
create the venv with uv -> install the pinned torch/torchvision and the app
-> verify -> write the record. The record is deleted before anything changes
and written only after verification passed, so an interrupted or failed run
is never mistaken for a working installation. Progress and every line of
uv's output go to a :data:`~ddpstudio.bootstrap.events.Sink`; failures are
raised as :class:`~ddpstudio.bootstrap.failure.BootstrapFailure`.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ddpstudio.bootstrap import driver as nvidia
from ddpstudio.bootstrap import exchange, failure, network, process, record, verify
from ddpstudio.bootstrap.cuda_index import CPU_BUILD, TorchBuild, Verdict, choose
from ddpstudio.bootstrap.events import Finished, LogLine, Sink, StepStarted
from ddpstudio.bootstrap.layout import Layout
from ddpstudio.bootstrap.lock import SetupLock
from ddpstudio.bootstrap.pins import PINS, PYTHON_VERSION
from ddpstudio.bootstrap.uv import Sources, Uv
from ddpstudio.core.platform import Platform

STEPS = (
    "Checking this computer",
    "Preparing Python",
    "Downloading and installing PyTorch and DDP Studio",
    "Checking that PyTorch works",
    "Saving the setup",
)
# Free space the install needs: the GPU builds are several GB unpacked
# (uv's cache is hardlinked into the environment, so it does not count twice).
NEEDED_GB = {"gpu": 8.0, "cpu": 3.0, "reinstall": 1.0}


@dataclass(frozen=True)
class Options:
    """Everything a run may be told; the defaults are what the installer uses."""

    root: Path
    platform: Platform
    python: str = PYTHON_VERSION  # a version for uv to fetch, or an interpreter path
    torch_index: str | None = None  # None: the table's choice
    extra_index_urls: tuple[str, ...] = ()
    default_index: str | None = None
    find_links: tuple[str, ...] = ()
    index_strategy: str | None = None
    wheel: Path | None = None  # None: the newest in <root>/wheels
    uv: Path | None = None  # None: <root>/uv(.exe)
    cuda_driver: str | None = None  # the driver seam: "12.8" or "none"
    compute: str | None = None  # the GPU seam: "6.1,8.9"
    force_cpu: bool = False
    repair: bool = False  # start from an empty environment
    min_free_gb: float | None = None  # None: NEEDED_GB


def _has_torch(env: Path) -> bool:
    return any(env.glob("Lib/site-packages/torch")) or any(env.glob("lib/python*/site-packages/torch"))


def _free_gb(path: Path) -> float:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free / 1e9


class _Run:
    """One attempt; a retry is a new attempt."""

    def __init__(self, options: Options, sink: Sink, running: process.Running | None = None) -> None:
        self.options = options
        self.sink = sink
        self.running = running or process.Running()
        self.layout = Layout(options.root, options.platform)
        self.step_index = 0

    def log(self, text: str) -> None:
        self.sink(LogLine(text))

    def step(self) -> None:
        if self.running.cancelled.is_set():
            raise failure.cancelled()
        self.step_index += 1
        self.sink(StepStarted(self.step_index, len(STEPS), STEPS[self.step_index - 1]))

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        opts, layout = self.options, self.layout

        self.step()
        uv = Uv(layout, opts.uv or layout.uv)
        if not uv.executable.is_file():
            raise failure.files_missing(f"uv ({uv.executable})")
        wheel = opts.wheel or layout.app_wheel()
        if wheel is None or not wheel.is_file():
            raise failure.files_missing(f"the DDP Studio package (ddpstudio-*.whl in {layout.wheels_dir})")
        self.log(f"DDP Studio package: {wheel.name}")
        driver = nvidia.detect(opts.platform, opts.cuda_driver, opts.compute)
        self.log(driver.describe())
        build = self._choose(driver)
        sources = Sources(
            torch_index=opts.torch_index or build.index_url,
            extra_index_urls=opts.extra_index_urls,
            default_index=opts.default_index,
            find_links=opts.find_links,
            index_strategy=opts.index_strategy,
        )
        self.log(f"PyTorch build: {build.tag} ({', '.join(PINS)}) from {sources.torch_index}")
        self.log(network.load(layout.network_file).describe())
        self._check_disk(build)

        previous = record.read(layout.record)
        record.clear(layout.record)  # from here on, the environment is "not set up"

        self.step()
        env = uv.environment()
        self._prepare_venv(uv, env, fresh=self._needs_fresh_env(previous, build, sources))

        self.step()
        result = process.run(uv.install(wheel, sources), opts.platform, self.log, env=env, running=self.running)
        if self.running.cancelled.is_set():
            raise failure.cancelled()
        if result.returncode != 0:
            raise failure.from_uv("installing PyTorch and DDP Studio", result.output, result.returncode, sources.torch_index)

        self.step()
        checked = verify.verify(layout.python(layout.env), build, opts.platform, self.log, env, self.running)
        self.log(
            f"torch {checked['torch']} (CUDA {checked['torch_cuda'] or 'none'}); "
            f"GPU usable: {'yes' if checked['cuda_available'] else 'no'}; Gloo: works"
        )
        # Decides only how gradients travel (pytorch #186535): never fails the setup.
        probed = exchange.record(layout.python(layout.env), opts.platform, self.log, env, self.running)
        self.log(f"Gloo all-reduce of CUDA tensors: {probed['outcome'] or 'not known'} ({probed['detail']})")

        self.step()
        data = {
            "app_version": checked["app"],
            "wheel": wheel.name,
            "build": build.tag,
            "index_url": sources.torch_index,
            "index_overridden": opts.torch_index is not None,
            "pins": list(PINS),
            "driver": {"cuda": str(driver.cuda) if driver.cuda else None, "version": driver.driver_version, "state": driver.state},
            "python": checked["python"],
            "torch": checked["torch"],
            "torch_cuda": checked["torch_cuda"],
            "cuda_available": checked["cuda_available"],
            "gpus": checked["gpus"],
            "gloo": True,
            "gloo_cuda_all_reduce": probed,
            "uv": self._uv_version(uv, env),
            "platform": opts.platform.system,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "duration_s": round(time.monotonic() - started, 1),
        }
        record.write(layout.record, data)
        self.log(f"Saved the setup record: {layout.record}")
        self.sink(Finished(data))
        return data

    def _choose(self, driver: nvidia.DriverInfo) -> TorchBuild:
        if self.options.force_cpu:
            self.log("Using the CPU build, as asked.")
            return CPU_BUILD
        choice = choose(driver.cuda, driver.gpus)
        self.log(f"Build choice: {choice.reason}")
        if choice.build is None:
            raise failure.no_gpu_build(choice.reason, driver_update_helps=choice.verdict is Verdict.DRIVER_TOO_OLD)
        return choice.build

    def _check_disk(self, build: TorchBuild) -> None:
        needed = self.options.min_free_gb
        if needed is None:
            if _has_torch(self.layout.env) and not self.options.repair:
                needed = NEEDED_GB["reinstall"]
            else:
                needed = NEEDED_GB["gpu" if build.uses_gpu else "cpu"]
        free = _free_gb(self.layout.root)
        self.log(f"Free disk space: {free:.1f} GB (about {needed:.0f} GB needed).")
        if free < needed:
            raise failure.disk_full(free, needed, str(self.layout.root), f"free {free:.2f} GB < {needed} GB")

    def _needs_fresh_env(self, previous: dict[str, Any] | None, build: TorchBuild, sources: Sources) -> bool:
        """Start from an empty environment for a repair, or when the torch build changes.

        uv keeps an installed torch 2.14.1+cu128 when asked for torch==2.14.1,
        so a driver update (cu128 -> cu130) or the CPU fallback needs a new env.
        The same holds when an environment has torch but no record (a failed run).
        """
        if self.options.repair:
            return True
        if not _has_torch(self.layout.env):
            return False
        if previous is None:
            self.log("The previous setup did not finish: starting from an empty environment.")
            return True
        if (previous.get("build"), previous.get("index_url")) != (build.tag, sources.torch_index):
            self.log(f"The PyTorch build changes ({previous.get('build')} -> {build.tag}): starting from an empty environment.")
            return True
        return False

    def _prepare_venv(self, uv: Uv, env: dict[str, str], fresh: bool) -> None:
        layout = self.layout
        if fresh and layout.env.exists():
            self.log(f"Removing {layout.env}")
            try:
                shutil.rmtree(layout.env)
            except OSError as exc:
                raise failure.files_in_use(str(exc)) from None
        python = layout.python(layout.env)
        if python.exists():
            self.log(f"Using the existing environment {layout.env}")
            return
        result = process.run(uv.create_venv(self.options.python, clear=layout.env.exists()), self.options.platform, self.log, env=env, running=self.running)
        if self.running.cancelled.is_set():
            raise failure.cancelled()
        if result.returncode != 0:
            raise failure.from_uv("preparing Python", result.output, result.returncode)

    def _uv_version(self, uv: Uv, env: dict[str, str]) -> str:
        result = process.run(uv.version(), self.options.platform, lambda _line: None, env=env)
        return result.output.strip()


def set_up(options: Options, sink: Sink, running: process.Running | None = None) -> dict[str, Any]:
    """Builds (or repairs) the environment; returns the record or raises BootstrapFailure.
    ``running`` lets a window stop the child process when the user closes it."""
    lock = SetupLock(Layout(options.root, options.platform).lock_file)
    if not lock.acquire():
        raise failure.busy()
    try:
        return _Run(options, sink, running).run()
    finally:
        lock.release()


def attempt(options: Options, sink: Sink, running: process.Running | None = None) -> failure.BootstrapFailure | None:
    """One try, for the front ends: None on success, else the failure (also sent as a Failed event).

    Anything unforeseen still becomes one plain message; the traceback goes to the log.
    """
    from ddpstudio.bootstrap.events import Failed

    try:
        set_up(options, sink, running)
        return None
    except failure.BootstrapFailure as exc:
        problem = exc
    except OSError as exc:
        if exc.errno == 28 or getattr(exc, "winerror", None) == 112:  # ENOSPC / ERROR_DISK_FULL
            problem = failure.disk_full(None, NEEDED_GB["gpu"], str(options.root), repr(exc))
        else:
            problem = failure.unexpected(exc)
    except Exception as exc:  # noqa: BLE001 - the one place that turns surprises into a message
        problem = failure.unexpected(exc)
    sink(Failed(problem))
    return problem
