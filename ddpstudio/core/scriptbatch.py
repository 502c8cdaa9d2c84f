"""What a user's script's batch size becomes with the ranks: the plan's line on the effective batch.

In DDP every rank loads its own batch, so a script's ``--batch-size 32`` is
per rank and one optimizer step averages 32 x ranks samples: the effective
batch grows with the GPUs, and the learning rate tuned for one GPU no longer
fits, unless the script divides the option by its rank count itself (the
PyTorch ImageNet example: ``args.batch_size = int(args.batch_size /
ngpus_per_node)``), or hands it to a loader that does (Ignite's
``idist.auto_dataloader``). The plan says which, read from the script's argparse and
the user's arguments (core/scriptargs.py); nothing is run. A script whose
batch cannot be read (another parser, a computed value) gets no line.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from ddpstudio.core.scriptargs import declared_options, option_values

# The destinations a batch option has in the scripts we know (argparse's dest: --batch-size -> batch_size).
BATCH_DESTS = ("batch_size", "train_batch_size", "per_device_train_batch_size", "micro_batch_size", "batch", "bs")


def script_batch_reason(tree: ast.AST | None, args: Sequence[str], world_size: int | None) -> str | None:
    """The plan's line on the script's batch with ``world_size`` ranks (None: the script starts its own)."""
    options = declared_options(tree) if tree is not None else {}
    dest = next((d for d in BATCH_DESTS if d in options), None)
    if dest is None:
        return None
    value = option_values(options, args)[dest]
    name = next((s for s in value.option.strings if s.startswith("--")), value.option.strings[0])
    size = value.value
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        return None
    said = f"{name} {size}, " + ("given" if value.given else "the script's default")
    divided = _divided_at(tree, dest)
    if divided is not None:
        return (f"the script divides {name} by a number of ranks (line {divided}), so its effective batch stays "
                f"about {size} ({said}) as the ranks change")
    handed = _split_by_library(tree)
    if handed is not None:
        return (f"the script hands its batch size to Ignite's idist.auto_dataloader (line {handed}), which divides "
                f"it by the number of ranks, so its effective batch stays about {size} ({said}) as the ranks change")
    if world_size is None:
        return (f"each rank the script starts takes its own batch ({said}): the effective batch is {size} x the "
                "number of ranks, so it grows with the GPUs; a learning rate tuned for one may need scaling")
    if world_size == 1:
        return None
    keep = f"{name} {size // world_size}" if size % world_size == 0 else f"about {name} {max(1, size // world_size)}"
    return (f"effective batch {size * world_size} = {world_size} ranks x {size} ({said}): each rank takes its own "
            f"batch, so it grows with the ranks; to keep one rank's {size}, give {keep}")


# Calls that split the batch size they are given over the ranks: Ignite's idist.auto_dataloader divides its
# batch_size by the world size (ignite/distributed/auto.py, "batch_size //= world_size").
SPLITTING_LOADERS = ("auto_dataloader",)


def _split_by_library(tree: ast.AST) -> int | None:
    """The first line that gives a ``batch_size`` to a loader that splits it over the ranks, or None."""
    lines = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
             and (ast.unparse(node.func).rpartition(".")[2] in SPLITTING_LOADERS)
             and any(k.arg == "batch_size" for k in node.keywords)]
    return min(lines) if lines else None


# Words of a rank count on the right of the division (ngpus_per_node, world_size, dist.get_world_size(), ...).
RANK_COUNT_WORDS = ("world", "gpus", "nprocs", "num_processes", "device_count", "replicas", "ranks", "nodes")


def _divided_at(tree: ast.AST, dest: str) -> int | None:
    """The first line that divides the option by a rank count (``args.batch_size / ngpus_per_node``, ``//``,
    ``/=``, ``//=``), or None. A division by anything else (``batch_size // 2``) is not the rank split."""
    def is_option(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == dest) or (isinstance(node, ast.Name)
                                                                            and node.id == dest)

    def counts_ranks(node: ast.AST) -> bool:
        text = ast.unparse(node).lower()
        return any(word in text for word in RANK_COUNT_WORDS)

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            left, op, right = node.left, node.op, node.right
        elif isinstance(node, ast.AugAssign):
            left, op, right = node.target, node.op, node.value
        else:
            continue
        if isinstance(op, (ast.Div, ast.FloorDiv)) and is_option(left) and counts_ranks(right):
            lines.append(node.lineno)
    return min(lines) if lines else None
