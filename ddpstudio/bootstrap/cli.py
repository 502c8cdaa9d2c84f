"""``python -m ddpstudio.bootstrap``: set up, repair or launch an installation.

    setup   build the environment (the installer runs this at the end)
    repair  delete the environment and build it again (Start menu: "Repair DDP Studio")
    launch  start the app, setting it up first if needed (the app's shortcut)
    choose  print which PyTorch build fits this driver and these GPUs, change nothing
            (choose [--driver-cuda X.Y] [--compute A.B,C.D] [--json])

Every package source can be overridden for mirrors and tests, by flag or by
environment variable (flags win): DDPSTUDIO_TORCH_INDEX_URL,
DDPSTUDIO_EXTRA_INDEX_URL and DDPSTUDIO_FIND_LINKS (space-separated),
DDPSTUDIO_DEFAULT_INDEX, DDPSTUDIO_INDEX_STRATEGY, DDPSTUDIO_BOOTSTRAP_PYTHON,
DDPSTUDIO_BOOTSTRAP_CUDA_DRIVER ("12.8" or "none": the driver seam),
DDPSTUDIO_BOOTSTRAP_COMPUTE ("6.1,8.9": the GPUs' compute capabilities).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from ddpstudio.bootstrap import driver as nvidia
from ddpstudio.bootstrap.cuda_index import CPU_BUILD, TORCH_VERSION, Choice, Verdict, choose
from ddpstudio.bootstrap.environment import Options
from ddpstudio.bootstrap.failure import Problem
from ddpstudio.bootstrap.layout import Layout
from ddpstudio.bootstrap.pins import PYTHON_VERSION
from ddpstudio.core.platform import current


def _env_list(name: str) -> list[str]:
    return os.environ.get(name, "").split()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ddpstudio.bootstrap", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", choices=("setup", "repair", "launch", "choose"), default="setup")
    p.add_argument("--root", type=Path, help="the installation folder (default: the folder above this Python's venv)")
    p.add_argument("--no-window", action="store_true", help="print progress instead of showing the window")
    p.add_argument("--python", default=os.environ.get("DDPSTUDIO_BOOTSTRAP_PYTHON", PYTHON_VERSION), help="Python version for uv, or an interpreter path")
    p.add_argument("--torch-index", default=os.environ.get("DDPSTUDIO_TORCH_INDEX_URL"), help="use this index instead of the table's choice")
    p.add_argument("--extra-index-url", action="append", default=None, help="another package index (repeatable)")
    p.add_argument("--default-index", default=os.environ.get("DDPSTUDIO_DEFAULT_INDEX"), help="replaces PyPI")
    p.add_argument("--find-links", action="append", default=None, help="a folder or page of wheels (repeatable)")
    p.add_argument("--index-strategy", default=os.environ.get("DDPSTUDIO_INDEX_STRATEGY"), help="uv's --index-strategy")
    p.add_argument("--wheel", type=Path, help="the app wheel (default: the newest in <root>/wheels)")
    p.add_argument("--uv", type=Path, help="the uv executable (default: <root>/uv.exe)")
    p.add_argument("--driver-cuda", "--cuda-driver", dest="cuda_driver", help='pretend the driver supports this CUDA version ("12.8") or that there is none ("none")')
    p.add_argument("--compute", help='pretend the GPUs have these compute capabilities ("6.1,8.9")')
    p.add_argument("--json", action="store_true", help="choose: print JSON")
    p.add_argument("--cpu", action="store_true", help="install the CPU build whatever the driver")
    p.add_argument("--min-free-gb", type=float, help="free disk space to insist on")
    return p


def _default_root() -> Path | None:
    """Run from <root>/bootstrap's Python, the root is the folder above that venv."""
    prefix = Path(sys.prefix)
    return prefix.parent if prefix.name == "bootstrap" else None


def options_from(args: argparse.Namespace, root: Path) -> Options:
    return Options(
        root=root.resolve(),
        platform=current(),
        python=args.python,
        torch_index=args.torch_index,
        extra_index_urls=tuple(args.extra_index_url if args.extra_index_url is not None else _env_list("DDPSTUDIO_EXTRA_INDEX_URL")),
        default_index=args.default_index,
        find_links=tuple(args.find_links if args.find_links is not None else _env_list("DDPSTUDIO_FIND_LINKS")),
        index_strategy=args.index_strategy,
        wheel=args.wheel.resolve() if args.wheel else None,
        uv=args.uv.resolve() if args.uv else None,
        cuda_driver=args.cuda_driver,
        compute=args.compute,
        force_cpu=args.cpu,
        repair=args.action == "repair",
        min_free_gb=args.min_free_gb,
    )


def _choose(options: Options, as_json: bool) -> int:
    """Prints the decision; exit 0 with a build, else the setup's exit code for the same case."""
    info = nvidia.detect(options.platform, options.cuda_driver, options.compute)
    choice = Choice(CPU_BUILD, "The CPU build, as asked.") if options.force_cpu else choose(info.cuda, info.gpus)
    build = choice.build or CPU_BUILD  # nothing else runs here: the CPU build is the offer
    code = 0
    if choice.build is None:
        code = (Problem.DRIVER_TOO_OLD if choice.verdict is Verdict.DRIVER_TOO_OLD else Problem.GPU_UNSUPPORTED).exit_code
    out = {
        "build": build.tag,
        "reason": choice.reason,
        "gpu_build_possible": choice.build is not None,
        "index_url": options.torch_index or build.index_url,
        "torch": TORCH_VERSION,
        "minor_version_compatibility": choice.minor_compat,
        "driver": {"cuda": str(info.cuda) if info.cuda else None, "version": info.driver_version, "state": info.state},
        "gpus": [{"name": n, "compute": str(c)} for n, c in zip(info.gpu_names or (None,) * len(info.gpus), info.gpus)],
    }
    if as_json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{build.tag}  ({out['index_url']})\n{info.describe()}\n{choice.reason}")
    return code


def _run_setup(options: Options, no_window: bool, launch_after: bool) -> int:
    from ddpstudio.bootstrap import launch, logfile

    layout = Layout(options.root, options.platform)

    def start() -> None:
        launch.start_app(layout)

    if not no_window:
        try:
            from ddpstudio.bootstrap import window

            if window.available():
                icon = layout.root / "ddpstudio.ico"
                return window.ProgressWindow(
                    options,
                    sink=lambda s: logfile.tee(s, layout.log_file),
                    start_app=start if launch_after else None,
                    icon=str(icon) if icon.exists() and options.platform.is_windows else None,
                    auto_start=launch_after,
                ).run()
        except ImportError:
            pass  # a Python without tkinter: fall back to the console
    from ddpstudio.bootstrap.console import run_console

    code = run_console(options, layout.log_file)
    if code == 0 and launch_after:
        start()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.action == "choose" and args.root is None:
        args.root = Path.cwd()  # choose reads and writes nothing there
    root = args.root or _default_root()
    if root is None:
        print("--root is required: the DDP Studio installation folder.", file=sys.stderr)
        return 2
    try:
        options = options_from(args, root)
        if args.cuda_driver:
            nvidia.parse_override(args.cuda_driver, args.compute)
        elif args.compute:
            nvidia.parse_computes(args.compute)
    except ValueError as exc:
        parser().error(str(exc))
    if args.action == "choose":
        return _choose(options, args.json)
    if args.action == "launch":
        from ddpstudio.bootstrap import launch

        layout = Layout(options.root, options.platform)
        if launch.is_ready(layout):
            launch.start_app(layout)
            return 0
        return _run_setup(options, args.no_window, launch_after=True)
    return _run_setup(options, args.no_window, launch_after=False)
