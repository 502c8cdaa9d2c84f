"""Checks a run request before anything starts; each problem names its field and the fix.

The CLI prints the problems and exits non-zero; the window shows them next to
the field and keeps Launch disabled. Nothing here creates files or folders
of the user's; only a cache of torchvision's model names in our data folder.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core.plan import MLP_MODEL, SYNTHETIC_MAX_SAMPLES, RecipeSpec, ScriptSpec

DATA_SOURCES = ("synthetic", "folder", "cifar10")
CIFAR_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch", "batches.meta")
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}


@dataclass(frozen=True)
class Problem:
    field: str
    message: str

    def __str__(self) -> str:
        return self.message


def nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def writable_problem(field: str, path: str, what: str) -> Problem | None:
    """Is ``path`` (a folder, existing or to be created) writable? Probes with a temp file."""
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        return Problem(field, f"the {what} {target} is a file, not a folder; choose a folder")
    base = nearest_existing(target)
    if not base.is_dir():
        return Problem(field, f"the {what} {target} cannot be created because {base} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as exc:
        return Problem(field, f"the {what} {target} is not writable ({exc.strerror or exc}); "
                              "choose a folder you can write to")
    return None


def classification_models() -> list[str]:
    """torchvision's classification models, cached per torchvision version.

    Importing torchvision costs about 2 s; paying it on every launch put
    ``ddpstudio run``'s first step behind torchrun's (benchmarks/overhead.py).
    """
    import importlib.metadata
    import json

    from ddpstudio.core import paths
    from ddpstudio.core.atomic import write_json

    cache = paths.data_dir() / "cache" / f"torchvision-{importlib.metadata.version('torchvision')}-models.json"
    try:
        names = json.loads(cache.read_text(encoding="utf-8"))
        if isinstance(names, list) and names:
            return names
    except (OSError, ValueError):
        pass
    import torchvision

    names = sorted(torchvision.models.list_models(module=torchvision.models))
    try:
        write_json(cache, names, indent=None)
    except OSError:
        pass  # a read-only data folder only costs the import next time
    return names


def check_recipe(spec: RecipeSpec) -> list[Problem]:
    problems: list[Problem] = []
    if spec.model != MLP_MODEL and spec.model not in classification_models():
        problems.append(Problem("model", f"unknown model {spec.model!r}: use a torchvision classification model "
                                         f"such as resnet18, resnet50 or mobilenet_v3_small (or {MLP_MODEL}, "
                                         "the built-in two-layer perceptron)"))
    elif spec.image_size < 1:
        problems.append(Problem("image_size", f"the image size must be at least 1 pixel (got {spec.image_size})"))
    elif spec.model != MLP_MODEL:  # the perceptron takes any size: nothing to probe, no torchvision
        from ddpstudio.core.imagesize import image_size_problem

        why = image_size_problem(spec.model, spec.image_size)
        if why:
            problems.append(Problem("image_size", why))
    if spec.data not in DATA_SOURCES:
        problems.append(Problem("data", f"unknown data source {spec.data!r}: use synthetic, folder or cifar10"))
    elif spec.data != "synthetic":
        problems += check_data_dir(spec.data, spec.data_dir)
    elif not 1 <= spec.synthetic_samples <= SYNTHETIC_MAX_SAMPLES:
        problems.append(Problem("synthetic_samples", f"the synthetic data holds 1 to {SYNTHETIC_MAX_SAMPLES:,} "
                                                     f"distinct images per epoch (got {spec.synthetic_samples:,}); "
                                                     f"the default is {RecipeSpec.synthetic_samples:,}, and more "
                                                     "epochs train for longer"))
    if spec.batch_size < 1:
        problems.append(Problem("batch_size", f"batch size must be at least 1 (got {spec.batch_size})"))
    if spec.epochs < 1:
        problems.append(Problem("epochs", f"epochs must be at least 1 (got {spec.epochs})"))
    if spec.max_steps is not None and spec.max_steps < 1:
        problems.append(Problem("max_steps", f"max steps must be at least 1 (got {spec.max_steps})"))
    if spec.accumulate < 1:
        problems.append(Problem("accumulate", f"gradient accumulation needs at least 1 micro-batch per step (got "
                                              f"{spec.accumulate}); 1 means no accumulation"))
    if not math.isfinite(spec.lr) or spec.lr <= 0:
        finite = ", and finite" if math.isinf(spec.lr) and spec.lr > 0 else ""  # "positive (got inf)" read as odd
        problems.append(Problem("lr", f"the learning rate must be a positive number{finite} (got {spec.lr}); "
                                      f"the recipe's default is {RecipeSpec.lr:g}"))
    if spec.workers is not None and spec.workers < 0:
        problems.append(Problem("workers", f"the number of data-loading workers must be 0 or more (got "
                                           f"{spec.workers}); 0 loads data in the training process itself"))
    problems += check_schedule(spec)
    if spec.checkpoint_every is not None and spec.checkpoint_every < 1:
        problems.append(Problem("checkpoint_every", f"checkpoint-every must be at least 1 step (got "
                                                    f"{spec.checkpoint_every})"))
    elif spec.checkpoint_every and not spec.checkpoint_dir:
        problems.append(Problem("checkpoint_every", "checkpoints every few steps need a checkpoint folder: give one"))
    if spec.checkpoint_dir:
        problem = writable_problem("checkpoint_dir", spec.checkpoint_dir, "checkpoint folder")
        if problem:
            problems.append(problem)
    if spec.resume:
        problems += check_resume(spec)
    return problems


def check_resume(spec: RecipeSpec) -> list[Problem]:
    """The checkpoint to resume from is ours, intact, for this model, and has steps left (core.checkpoint)."""
    from ddpstudio.core import checkpoint
    from ddpstudio.core.plan import CHECKPOINT_NAME

    if not spec.checkpoint_dir:
        return [Problem("resume", "resume needs the checkpoint folder to resume from: give it (--checkpoint-dir)")]
    if not (Path(spec.checkpoint_dir) / CHECKPOINT_NAME).is_file():
        return [Problem("resume", f"there is no {CHECKPOINT_NAME} in {spec.checkpoint_dir} to resume "
                                  "from; train once with this checkpoint folder first")]
    try:
        info = checkpoint.verify(spec.checkpoint_dir, spec.model)
    except checkpoint.CheckpointError as exc:
        return [Problem("resume", f"cannot resume: {exc}")]
    why = checkpoint.nothing_left(info, spec.epochs, spec.max_steps) or checkpoint.accumulation_mismatch(
        info, spec.accumulate)
    return [Problem("resume", why)] if why else []
def check_schedule(spec: RecipeSpec) -> list[Problem]:
    """The LR schedule, warm-up and evaluation interval."""
    from ddpstudio.core.plan import LR_SCHEDULES

    problems: list[Problem] = []
    if spec.lr_schedule not in LR_SCHEDULES:
        problems.append(Problem("lr_schedule", f"unknown learning-rate schedule {spec.lr_schedule!r}: "
                                               f"use {', '.join(LR_SCHEDULES)}"))
    if spec.warmup_steps < 0:
        problems.append(Problem("warmup_steps", f"warm-up steps cannot be negative (got {spec.warmup_steps})"))
    elif spec.max_steps is not None and spec.max_steps >= 1 and spec.warmup_steps >= spec.max_steps:
        problems.append(Problem("warmup_steps", f"{spec.warmup_steps} warm-up steps leave nothing of a "
                                                f"{spec.max_steps}-step run; use fewer warm-up steps"))
    if spec.eval_every is not None and spec.eval_every < 1:
        problems.append(Problem("eval_every", f"evaluate-every must be at least 1 step (got {spec.eval_every})"))
    return problems


def check_data_dir(kind: str, data_dir: str | None) -> list[Problem]:
    if not data_dir:
        return [Problem("data_dir", f"the {kind} data source needs a data folder: choose one")]
    path = Path(data_dir).expanduser()
    if path.is_file():
        return [Problem("data_dir", f"the data folder {path} is a file, not a folder; give the folder that holds "
                                    "the data")]
    if not path.is_dir():
        return [Problem("data_dir", f"the data folder {path} does not exist; choose an existing folder")]
    if kind == "cifar10":
        from ddpstudio.core.plan import CIFAR_FOLDER, cifar_root

        batches = cifar_root(str(path)) / CIFAR_FOLDER
        if not (batches / "data_batch_1").is_file():
            return [Problem("data_dir", f"{path} does not hold CIFAR-10's {CIFAR_FOLDER} folder; unpack "
                                        "cifar-10-python.tar.gz there")]
        # What torchvision's CIFAR10 checks and opens (torchvision/datasets/cifar.py ``_check_integrity``:
        # train_list + test_list; then the meta file).
        missing = [n for n in CIFAR_TRAIN_FILES if not (batches / n).is_file()]
        if missing:
            return [Problem("data_dir", f"{batches} lacks {', '.join(missing)}: it is incomplete; unpack "
                                        "cifar-10-python.tar.gz there again")]
        return []
    try:
        classes = [d for d in path.iterdir() if d.is_dir()]
    except OSError as exc:
        return [Problem("data_dir", f"the data folder {path} cannot be read ({exc.strerror or exc})")]
    for folder in classes:
        try:
            next(os.scandir(folder), None)
        except OSError as exc:
            return [Problem("data_dir", f"the class folder {folder} cannot be read ({exc.strerror or exc}); "
                                        "give yourself read access to it, or move it out of the data folder")]
    if not classes:
        files = sorted(f.name for f in path.iterdir())
        if files:  # a README, or images with no class folders: not "empty"
            return [Problem("data_dir", f"the data folder {path} has no class folders (it holds {len(files)} "
                                        f"file{'s' if len(files) != 1 else ''}, such as {files[0]}): it needs one "
                                        "sub-folder of images per class (ImageFolder layout)")]
        return [Problem("data_dir", f"the data folder {path} is empty: it needs one sub-folder of images per "
                                    "class (ImageFolder layout)")]
    if not any(f.suffix.lower() in IMAGE_SUFFIXES for d in classes for f in d.rglob("*")):
        return [Problem("data_dir", f"no images found in the class folders of {path}; "
                                    f"expected files such as {', '.join(sorted(IMAGE_SUFFIXES)[:3])}")]
    return []


def check_script(spec: ScriptSpec, platform=None) -> list[Problem]:
    if not spec.path:
        return [Problem("script", "choose the training script to run")]
    path = Path(spec.path).expanduser()
    if not path.exists():
        return [Problem("script", f"the script {path} does not exist; check the path")]
    if not path.is_file():
        return [Problem("script", f"{path} is a folder, not a script; choose a .py file")]
    not_python = not_python_problem(path)
    if not_python:
        return [not_python]
    if spec.style not in ("args", "env", "spawn"):
        return [Problem("script_style", f"unknown script style {spec.style!r}: use args, env or spawn")]
    if spec.cwd and not Path(spec.cwd).is_dir():
        return [Problem("cwd", f"the working folder {spec.cwd} does not exist")]
    if spec.style in ("args", "spawn"):
        from ddpstudio.core.launch.commands import dist_args
        from ddpstudio.core.plan import Plan

        probe = Plan(run_id="", run_dir="", world_size=2, backend="gloo", device="cpu", store="file",
                     init_method="file:///probe")
        try:
            dist_args(spec.dist_args, probe, 0, platform)  # split by the rules the launcher will use
        except ValueError as exc:
            return [Problem("dist_args", str(exc))]
    return []


# A URL of another scheme ("tcp://host:port", "env://"): at least two letters, so "D://pg" stays a drive.
URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish", "csh", "tcsh", "pwsh", "powershell", "perl", "ruby", "node"}


# What Windows users double-click to train, named by suffix (a .bat or .ps1 has no shebang to read).
OTHER_SCRIPTS = {".bat": "a Windows batch file", ".cmd": "a Windows batch file", ".ps1": "a PowerShell script",
                 ".sh": "a shell script"}


def not_python_problem(path: Path) -> Problem | None:
    """A shell or batch script, a notebook or a binary given as the script: Python would only say
    SyntaxError (issue 27)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        return Problem("script", f"the script {path} cannot be read ({exc.strerror or exc})")
    suffix = path.suffix.lower()
    if suffix == ".ipynb" or (head.lstrip().startswith(b"{") and b'"cells"' in head):
        return Problem("script", f"{path} is a Jupyter notebook, which Python cannot run as a script: export it "
                                 "(in Jupyter: File > Save and Export Notebook As > Executable Script, or "
                                 f"jupyter nbconvert --to script {path.name}) and give the .py file")
    first = head.split(b"\n", 1)[0]
    words = first[2:].decode("utf-8", "replace").replace("/", " ").split() if first.startswith(b"#!") else []
    if set(words) & SHELLS:  # "#!/usr/bin/env -S uv run --script" is Python: only known others are refused
        shebang = first.decode("utf-8", "replace").strip()
        return Problem("script", f"{path} starts with {shebang}: it is not a Python script; give the Python "
                                 "training script it runs")
    if suffix in OTHER_SCRIPTS:
        return Problem("script", f"{path} is {OTHER_SCRIPTS[suffix]}, not a Python script; give the Python "
                                 "training script it runs (its python ... line), with that script's own "
                                 "arguments after '--'")
    if b"\0" in head and suffix not in (".pyc", ".pyz"):  # both run under python
        return Problem("script", f"{path} is a binary file, not a Python script; give the .py training script")
    return None


def check_store_path(store_path: str | None, platform=None) -> list[Problem]:
    """A fixed FileStore path: a file (or ``file://`` URL) in a folder that exists and takes writes.

    Nothing is created for it: a mistyped shared folder (``\\\\server\\shar\\pg``) must not become a new
    local folder, and ``tcp://host:port`` must not become a folder named ``tcp:``.
    """
    from urllib.parse import urlparse

    if not store_path:
        return []
    scheme = URL_SCHEME.match(store_path)
    if scheme and scheme.group(1).lower() != "file":
        try:
            port = urlparse(store_path).port
        except ValueError:
            port = None
        tcp = f"the TCP store (--store tcp{f' --port {port}' if port else ''})"
        return [Problem("store_path", f"the store path {store_path} is a {scheme.group(1)}:// address, not a file: "
                                      "a store path names the FileStore's file (a path or a file:// URL); for "
                                      f"{tcp} leave out the store path")]
    path = store_path
    if store_path.startswith("file:"):
        from ddpstudio.core.platform import current
        from ddpstudio.core.rendezvous.storeurl import store_path_from_url

        try:
            path = store_path_from_url(store_path, platform or current())
        except ValueError:
            return []  # the policy says what torch cannot read in it
    folder = Path(path).expanduser().absolute().parent
    base = nearest_existing(folder)
    if base != folder and base.is_dir():
        missing = folder.relative_to(base).parts[0]
        return [Problem("store_path", f"the store folder {folder} does not exist: {base} has no {missing}; check "
                                      "the path (a fixed store path's folder is never created: a mistyped shared "
                                      "folder must not become a new local one), or create the folder first")]
    problem = writable_problem("store_path", str(folder), "store folder")
    return [problem] if problem else []


def check_port(port: int | None) -> list[Problem]:
    if port is None:
        return []
    from ddpstudio.core.rendezvous.ports import is_port_free, port_owner

    if not 1 <= port <= 65535:
        return [Problem("port", f"port {port} is out of range; use 1024-65535")]
    if port < 1024:
        return [Problem("port", f"port {port} is a privileged port (1-1023 are reserved for system services and "
                                "need administrator rights); use 1024-65535, or leave it empty to pick a free one")]
    if is_port_free(port):
        return []
    owner = port_owner(port) or {}
    who = f" by {owner.get('name')} (pid {owner.get('pid')})" if owner.get("pid") else ""
    return [Problem("port", f"port {port} is already in use{who}; choose another port or leave it empty "
                            "to pick a free one")]


def check_request(request, platform=None) -> list[Problem]:
    """All problems of a :class:`ddpstudio.core.policy.Request`, in field order (``platform``: where it runs)."""
    problems: list[Problem] = []
    if request.recipe is not None:
        problems += check_recipe(request.recipe)
    if request.script is not None:
        problems += check_script(request.script, platform)
    problems += check_store_path(request.store_path, platform)
    problems += check_port(request.port) if port_used(request) else []
    problems += check_rendezvous(request)
    problems += check_spawn_world(request)
    problems += check_restarts(request)
    problems += check_hangs(request)
    problems += check_run_space()
    return problems


def check_restarts(request) -> list[Problem]:
    """A count of restarts, and none for a spawn-style script (its ranks are its own children, not ours)."""
    restarts = getattr(request, "max_restarts", 0)
    if restarts < 0:
        return [Problem("max_restarts", f"the number of restarts cannot be negative (got {restarts}); 0 ends the "
                                        "run when a rank dies")]
    if restarts and request.script is not None and request.script.style == "spawn":
        return [Problem("max_restarts", "a script in spawn style starts its own ranks, so DDP Studio cannot restart "
                                        "them one by one; leave out the restarts, or use the args or env style")]
    return []


def check_hangs(request) -> list[Problem]:
    """A hang timeout that can elapse (0: not watched), and an action the launcher knows."""
    timeout, action = getattr(request, "hang_timeout", 45.0), getattr(request, "on_hang", "warn")
    if not math.isfinite(timeout) or timeout < 0:
        return [Problem("hang_timeout", f"the hang timeout must be 0 (not watched) or a number of seconds (got "
                                        f"{timeout})")]
    from ddpstudio.core.launch.hangwatch import ON_HANG

    if action not in ON_HANG:
        return [Problem("on_hang", f"unknown --on-hang {action!r}: choose warn or stop")]
    return []


def port_used(request) -> bool:
    """The policy gives a port to a TCP store and to an args-style template that says env:// (policy.py)."""
    if request.store == "tcp" or request.script is not None and request.script.style == "env":
        return True
    return request.script is not None and request.script.style == "args" and "env://" in request.script.dist_args


def check_rendezvous(request) -> list[Problem]:
    """A timeout that can elapse, and no FileStore path next to a TCP store (it would be ignored)."""
    problems: list[Problem] = []
    timeout = request.rendezvous_timeout
    if not math.isfinite(timeout) or timeout <= 0:
        problems.append(Problem("rendezvous_timeout", f"the rendezvous timeout must be a positive number of "
                                                      f"seconds (got {timeout:g})"))
    tcp = request.store == "tcp" or (request.script is not None and request.script.style == "env")
    if tcp and request.store_path:
        why = "the tcp store" if request.store == "tcp" else "scripts in env style (they rendezvous over TCP)"
        problems.append(Problem("store_path", f"a store path is for the file store, and {why} would ignore it; "
                                              "leave out the store path, or use the file store"))
    if request.port is not None and not port_used(request):
        problems.append(Problem("port", f"port {request.port} is for the TCP store, and the file store "
                                        f"{'you chose' if request.store == 'file' else '(the default)'} has no "
                                        "port: it would be ignored; use --store tcp, or leave out the port"))
    return problems


def check_spawn_world(request) -> list[Problem]:
    """In spawn style the script decides how many ranks it starts: a typed world size would mean nothing."""
    if request.script is None or request.script.style != "spawn" or request.world_size in (None, 1):
        return []
    return [Problem("world_size", f"a script in spawn style starts its own ranks, so a world size of "
                                  f"{request.world_size} cannot be applied; leave out --world-size: the script "
                                  "decides how many processes it starts (in its arguments, or in its code)")]


def check_run_space() -> list[Problem]:
    """The disk under DDP Studio's runs folder takes writes and has room for a run's events and logs."""
    from ddpstudio.core import paths
    from ddpstudio.core.launch.diskguard import space_problem

    problem = space_problem(paths.runs_dir())
    return [Problem("data_folder", f"cannot start a run: {problem.message}")] if problem else []
