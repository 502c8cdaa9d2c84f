"""Is a script written for torchrun? Then it wants env style, and the user is told why.

A torchrun script takes its place in the world from the environment: it
reads ``LOCAL_RANK`` (the DDP tutorial series' ``multigpu_torchrun.py``:
``int(os.environ["LOCAL_RANK"])``) or calls ``init_process_group`` without
an ``init_method``, which means ``env://`` (torch/distributed/distributed_c10d.py,
``init_process_group``: "If neither is specified, ``init_method`` is assumed to
be 'env://'"). Started in args style, such a script gets ``--dist-url ...``
appended and its argparse stops it at once ("unrecognized arguments"). A
script that declares the args template's own options (the PyTorch examples'
ImageNet ``--dist-url``) is an args script whatever else it reads. A script
written for ``torch.distributed.launch`` declares ``--local-rank`` (or
``--local_rank``) too, which that launcher gave each rank with the variables:
in env style each rank gets it as well (:func:`local_rank_option`). A script
built on Accelerate, Lightning, Transformers' Trainer or DeepSpeed leaves
the set-up to the library, which reads torchrun's variables.
Read from the AST, never run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ddpstudio.core.scriptargs import declared_strings
from ddpstudio.core.scriptgate import dotted

# torch.distributed.launch's per-rank argument ("--local-rank=N" since torch 2.0, "--local_rank=N" before): scripts
# written for it (Swin Transformer's main.py: required=True) declare one of these and stop without it.
LOCAL_RANK_OPTIONS = ("--local-rank", "--local_rank")
# What torchrun puts in each rank's environment and scripts read (torch/distributed/run.py's docs).
TORCHRUN_VARIABLES = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
ENV_URL = "env://"
# Libraries whose distributed set-up takes the world from torchrun's variables (Accelerate's PartialState,
# Lightning's torchelastic environment, the Trainer's TrainingArguments, deepspeed.init_distributed, Ultralytics'
# trainer, which runs torchrun on itself unless LOCAL_RANK is set: ultralytics/engine/trainer.py; Ignite's
# idist.Parallel without nproc_per_node): a script
# built on one calls no init_process_group of its own, and its argument parser (HfArgumentParser, a CLI of the
# library's) refuses the args template's options.
TORCHRUN_LIBRARIES = ("accelerate", "lightning", "pytorch_lightning", "transformers", "deepspeed", "ultralytics",
                      "ignite")


@dataclass(frozen=True)
class EnvSign:
    """What in the script says torchrun, its line, and what that means: the one-line reason's parts."""

    said: str
    line: int
    means: str

    def why(self) -> str:
        return f"the script {self.said} (line {self.line}): {self.means}"


def parses_any(tree: ast.Module, options: tuple[str, ...]) -> str | None:
    """The first of ``options`` the script's argparse declares exactly, or None."""
    declared = declared_strings(tree)
    return next((o for o in options if o in declared), None)


def local_rank_option(tree: ast.Module | None) -> str | None:
    """The script's own ``--local-rank``/``--local_rank`` option as it declares it (argparse), or None."""
    return parses_any(tree, LOCAL_RANK_OPTIONS) if tree is not None else None


def joins_by_env(tree: ast.Module | None) -> bool:
    """Does the script call ``init_process_group`` without an init_method (or with ``"env://"``)?"""
    return tree is not None and any(_joins_by_env(node) for node in ast.walk(tree))


def env_sign(tree: ast.Module) -> EnvSign | None:
    """The first place (in line order) where the script reads torchrun's variables or joins by env://; else
    the first import of a library that does that for it."""
    sign = torchrun_sign(tree)
    if sign is not None:
        return sign
    imports = [sign for node in ast.walk(tree) if (sign := _imports_library(node))]
    return min(imports, key=lambda s: s.line) if imports else None


def torchrun_sign(tree: ast.Module) -> EnvSign | None:
    """The first place (in line order) where the script itself reads torchrun's variables or joins by env://."""
    signs = [sign for node in ast.walk(tree) for sign in (_reads_variable(node), _joins_by_env(node)) if sign]
    return min(signs, key=lambda s: s.line) if signs else None


def imported_library(tree: ast.Module | None) -> str | None:
    """The first of ``TORCHRUN_LIBRARIES`` the script imports (in line order), or None."""
    imports = [(node.lineno, sign.said) for node in ast.walk(tree or ast.Module(body=[], type_ignores=[]))
               if (sign := _imports_library(node))]
    return min(imports)[1].removeprefix("imports ") if imports else None


def _imports_library(node: ast.AST) -> EnvSign | None:
    """``import accelerate``, ``from lightning import Trainer``, ``from transformers import Trainer``..."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        names = [node.module]
    else:
        return None
    found = next((n.split(".")[0] for n in names if n.split(".")[0] in TORCHRUN_LIBRARIES), None)
    if found is None:
        return None
    return EnvSign(f"imports {found}", node.lineno, "its distributed set-up reads the variables torchrun sets")


def _reads_variable(node: ast.AST) -> EnvSign | None:
    """``os.environ["LOCAL_RANK"]``, ``os.environ.get("RANK")``, ``os.getenv("WORLD_SIZE")``, ``"RANK" in
    os.environ``: reads, not writes (the DDP tutorial's spawn scripts set MASTER_ADDR themselves)."""
    name = None
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
        name = _text(node.slice)
    elif isinstance(node, ast.Call) and node.args and _is_env_getter(node.func):
        name = _text(node.args[0])
    elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
          and _is_environ(node.comparators[0])):
        name = _text(node.left)
    if name in TORCHRUN_VARIABLES:
        return EnvSign(f"reads {name} from its environment", node.lineno, "it is written for torchrun, which sets it")
    return None


def _joins_by_env(node: ast.AST) -> EnvSign | None:
    """``init_process_group(...)`` with no ``init_method`` (or ``"env://"``) and no store: torchrun's rendezvous."""
    if not isinstance(node, ast.Call):
        return None
    name = dotted(node.func)
    if name is None or name.rpartition(".")[2] != "init_process_group":
        return None
    keywords = {kw.arg: kw.value for kw in node.keywords}
    if None in keywords or "store" in keywords:  # **kwargs: cannot tell; a store: its own rendezvous
        return None
    method = keywords.get("init_method", node.args[1] if len(node.args) > 1 else None)
    if method is not None and _text(method) != ENV_URL:
        return None
    how = "without an init_method" if method is None else f'with init_method="{ENV_URL}"'
    return EnvSign(f"calls {name}() {how}", node.lineno, "it joins through the environment variables torchrun sets"
                   + (" (env://, the default)" if method is None else ""))


def _is_environ(node: ast.AST) -> bool:
    name = dotted(node)
    return name is not None and name.rpartition(".")[2] == "environ"


def _is_env_getter(func: ast.AST) -> bool:
    name = dotted(func)
    if name is None:
        return False
    owner, _, attr = name.rpartition(".")
    return (attr == "get" and _is_environ(func.value)) or (attr == "getenv" and owner in ("", "os"))


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
