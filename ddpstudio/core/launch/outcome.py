"""What a run that ended on its own is called: finished, or an honest "it did not really train" (issue 11).

A user's script whose ranks all exit 0 has not necessarily trained: the
PyTorch examples' ``distributed/ddp/example.py`` prints "Unable to locate
sufficient 2 gpus ... Exiting." and exits 0. What the launcher saw of each
rank decides: whether the rank helper saw it (it imported
``torch.distributed``, or exited without importing torch at all: a wrapper
that gives up first), whether it initialised its process group
(``rank_joined``) and whether it trained a step (reported or printed). Whether
torch was imported changes the words, never the outcome (issue 23). The
built-in recipe reports for itself and always ends plainly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ddpstudio.core.protocol import FINISHED, NOT_DISTRIBUTED, NOTHING_TRAINED, Outcome

LAST_LINES = 8  # per rank, in run_finished's last_output
STEP_EXAMPLES = ("a torch.optim step after a backward pass, which the rank helper sees, a line such as 'loss: 0.53' or "
                 "'Loss 5.3e-01', or ddpstudio.report.step()")
# A library that decides by itself whether to start DDP, and what makes it: said when its ranks never joined.
LIBRARY_NOTES = {
    "lightning": ("the script uses Lightning, whose Trainer trains in one process unless it is given several devices: "
                  "Trainer(devices=N, strategy=\"ddp\") with N the number of ranks (devices=\"auto\" is one device on "
                  "the CPU)"),
}
LIBRARY_NOTES["pytorch_lightning"] = LIBRARY_NOTES["lightning"]
# ultralytics/engine/trainer.py: world_size 0 for device "cpu" or "mps", else one per listed device; DDP only then.
LIBRARY_NOTES["ultralytics"] = ("the script uses Ultralytics, which trains with DDP on CUDA GPUs only: "
                                "train(device=\"0,1\") lists one GPU per rank; with device=\"cpu\" each rank "
                                "trains alone")


class RankFacts(Protocol):
    rank: int
    watched: bool  # the rank helper saw it import torch.distributed
    torchless: bool  # the rank helper saw it exit without importing torch
    in_group: bool  # it said rank_joined (initialised its process group)
    trained: bool  # it reported or printed at least one training step

    def last_lines(self) -> list[str]: ...


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    summary: str | None = None
    last_output: dict[str, list[str]] = field(default_factory=dict)  # rank (as text) -> its last lines


def judge(ranks: Sequence[RankFacts], world_size: int, library: str | None = None) -> Verdict:
    """The outcome of a script's run whose ranks all exited 0 and that nobody stopped; ``library``: the one
    the script imports that sets up DDP for it (envstyle.TORCHRUN_LIBRARIES), whose note a run that never
    joined gets."""
    in_group = [r for r in ranks if r.in_group]
    trained = any(r.trained for r in ranks)
    seen = any(r.watched or r.torchless for r in ranks)  # from inside: no rank_joined means none joined
    if not in_group and seen and not (world_size == 1 and trained):
        did = (f"each of the {len(ranks)} ranks trained its own copy" if trained
               else "and no rank trained a step")
        what = ("the ranks imported torch but none called torch.distributed.init_process_group"
                if any(r.watched for r in ranks) else
                "the ranks never imported torch, so none initialised a process group")
        summary = f"not a distributed script: {what} ({did}); all exited 0"
        if library in LIBRARY_NOTES:
            summary += f"; {LIBRARY_NOTES[library]}"
        return Verdict(NOT_DISTRIBUTED, _with_last_words(summary, ranks), _last_output(ranks))
    if in_group and not trained:
        summary = (f"finished, but nothing trained: {len(in_group)} of {len(ranks)} rank(s) initialised their "
                   f"process group and all exited 0, but no rank took, reported or printed a training step "
                   f"({STEP_EXAMPLES})")
        return Verdict(NOTHING_TRAINED, _with_last_words(summary, ranks), _last_output(ranks))
    return Verdict(FINISHED)


def script_library(plan) -> str | None:
    """The library the plan's script imports that sets up DDP for it (Lightning, Accelerate, ...), or None."""
    from ddpstudio.core.envstyle import imported_library
    from ddpstudio.core.scriptargs import parse_script
    from ddpstudio.core.scriptstyle import read_source

    return imported_library(parse_script(read_source(plan.script.path)))  # unreadable by now: None


def spawned_none(ranks: Sequence[RankFacts], plan) -> Verdict:
    """A spawn-style script that exited 0 having started no process: said so, and where its code counts CUDA
    GPUs on a run without any (the DDP tutorial's ``world_size = torch.cuda.device_count()``, then
    ``mp.spawn(..., nprocs=world_size)``: none on a CPU machine), that is the likely reason, with its line."""
    import ast

    from ddpstudio.core.scriptargs import parse_script
    from ddpstudio.core.scriptgate import dotted
    from ddpstudio.core.scriptstyle import read_source

    summary = "not a distributed script: it started no processes of its own (spawn style), so no rank joined"
    tree = parse_script(read_source(plan.script.path)) or ast.Module(body=[], type_ignores=[])
    line = min((node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                and (dotted(node.func) or "").endswith("device_count")), default=None)  # code, not a docstring
    if line is not None and plan.device == "cpu":
        summary += (f"; it counts CUDA GPUs to decide how many (torch.cuda.device_count(), line {line}), and this "
                    "machine has none: run it where there are CUDA GPUs, or make it start its ranks from a number "
                    "you give it")
    return Verdict(NOT_DISTRIBUTED, _with_last_words(summary + "; all exited 0", ranks), _last_output(ranks))


def copies_warning(ranks: Sequence[RankFacts], world_size: int) -> str | None:
    """Every rank trains and none joined a process group: N copies of one model, nothing shared."""
    if world_size < 2 or len(ranks) < world_size:
        return None
    if all(r.watched and r.trained and not r.in_group for r in ranks):
        return (f"the script trained {world_size} identical copies: no rank called "
                f"torch.distributed.init_process_group, so the {world_size} ranks share no gradients and each "
                f"trains the whole model on its own (run it on 1 rank, or wrap the model in "
                f"DistributedDataParallel after init_process_group)")
    return None


def own_groups_warning(rank: int, pids: Sequence[int]) -> str:
    """More than one process joined as one rank of a run that starts each rank itself: each copy of the script
    started ranks of its own (it runs torchrun itself, or spawns them), so separate groups train, sharing nothing."""
    listed = ", ".join(str(p) for p in sorted(pids))
    return (f"{len(pids)} processes joined as rank {rank} (pids {listed}): each copy of the script started ranks of "
            "its own (it runs torchrun or spawns its ranks itself), so separate groups were training, none sharing "
            "gradients with the others, and DDP Studio stopped the run")


def last_output_lines(last_output: Mapping[str, Sequence[str]] | None) -> list[str]:
    """run_finished's ``last_output`` as lines to show: ``[rank 0] Unable to locate ...``."""
    return [f"[rank {rank}] {line}" for rank, lines in sorted((last_output or {}).items(), key=lambda kv: int(kv[0]))
            for line in lines]


def _last_output(ranks: Sequence[RankFacts]) -> dict[str, list[str]]:
    return {str(r.rank): r.last_lines()[-LAST_LINES:] for r in ranks}


def _with_last_words(summary: str, ranks: Sequence[RankFacts]) -> str:
    """The summary and the last line a rank printed (rank 0 first): often the script's own reason."""
    for r in sorted(ranks, key=lambda r: r.rank):
        lines = r.last_lines()
        if lines:
            return f"{summary}; rank {r.rank}'s last output: {lines[-1].strip()!r}"
    return f"{summary}; the ranks printed nothing"
