"""core/launch/outcome.py: how a script's run that exited 0 is called, from what the launcher saw of each rank."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.launch.outcome import copies_warning, judge, last_output_lines


@dataclass
class Facts:
    rank: int
    watched: bool = True
    torchless: bool = False
    in_group: bool = True
    trained: bool = True
    lines: list[str] = field(default_factory=list)

    def last_lines(self) -> list[str]:
        return self.lines


def two(**kw) -> list[Facts]:
    return [Facts(0, **kw), Facts(1, **kw)]


@pytest.mark.parametrize("kw, world, outcome", [
    ({}, 2, protocol.FINISHED),  # a DDP script that trained
    ({"trained": False}, 2, protocol.NOTHING_TRAINED),
    ({"in_group": False, "trained": False}, 2, protocol.NOT_DISTRIBUTED),
    ({"in_group": False}, 2, protocol.NOT_DISTRIBUTED),  # N copies
    ({"in_group": False}, 1, protocol.FINISHED),  # one plain process that trained: nothing wrong
    ({"in_group": False, "trained": False}, 1, protocol.NOT_DISTRIBUTED),
    ({"watched": False, "in_group": False, "trained": False}, 2, protocol.FINISHED),  # helper off
    ({"watched": False, "in_group": False}, 2, protocol.FINISHED),
    # issue 23: torch never imported, said by the helper at exit: the same outcomes as with torch
    ({"watched": False, "torchless": True, "in_group": False, "trained": False}, 2, protocol.NOT_DISTRIBUTED),
    ({"watched": False, "torchless": True, "in_group": False, "trained": False}, 1, protocol.NOT_DISTRIBUTED),
    ({"watched": False, "torchless": True, "in_group": False}, 2, protocol.NOT_DISTRIBUTED),
    ({"watched": False, "torchless": True, "in_group": False}, 1, protocol.FINISHED),
])
def test_the_outcome_table(kw, world, outcome):
    ranks = two(**kw)[:world]
    assert judge(ranks, world).outcome == outcome


def test_the_summary_ends_with_the_first_ranks_last_words_and_the_tail_is_kept():
    ranks = [Facts(1, in_group=False, trained=False, lines=["b1", "b2"]),
             Facts(0, in_group=False, trained=False, lines=[f"a{i}" for i in range(12)])]
    verdict = judge(ranks, 2)
    assert verdict.summary.endswith("; rank 0's last output: 'a11'")
    assert verdict.last_output == {"1": ["b1", "b2"], "0": [f"a{i}" for i in range(4, 12)]}
    assert last_output_lines(verdict.last_output)[:1] == ["[rank 0] a4"]
    assert last_output_lines(verdict.last_output)[-1] == "[rank 1] b2"
    assert judge(two(trained=False), 2).summary.endswith("; the ranks printed nothing")


def test_a_lightning_script_whose_ranks_never_joined_is_told_what_makes_its_trainer_start_ddp(tmp_path):
    from types import SimpleNamespace

    from ddpstudio.core.launch.outcome import script_library

    script = tmp_path / "train.py"
    script.write_text("import torch\nimport lightning as L\ntrainer = L.Trainer(devices='auto')\n", encoding="utf-8")
    plan = SimpleNamespace(script=SimpleNamespace(path=str(script)))
    assert script_library(plan) == "lightning"
    copies = judge(two(in_group=False, lines=["train_loss: 0.2"]), 2, script_library(plan)).summary
    assert copies.startswith("not a distributed script: the ranks imported torch but none called ")
    assert ("; the script uses Lightning, whose Trainer trains in one process unless it is given several devices: "
            "Trainer(devices=N, strategy=\"ddp\") with N the number of ranks") in copies
    assert copies.endswith("; rank 0's last output: 'train_loss: 0.2'")  # its own words stay last
    # Only where the ranks never joined: a run that trained together, and other libraries, get no such note.
    assert judge(two(), 2, "lightning").summary is None
    script.write_text("from accelerate import Accelerator\n", encoding="utf-8")
    assert script_library(plan) == "accelerate"
    assert "Lightning" not in judge(two(in_group=False), 2, script_library(plan)).summary
    script.write_text("import torch\n", encoding="utf-8")
    assert script_library(plan) is None


def test_copies_only_when_every_rank_trained_watched_and_outside_any_group():
    assert copies_warning(two(in_group=False), 2).startswith("the script trained 2 identical copies")
    assert copies_warning(two(in_group=False)[:1], 2) is None  # rank 1 not started yet
    assert copies_warning([Facts(0, in_group=False), Facts(1, in_group=False, trained=False)], 2) is None
    assert copies_warning(two(in_group=False, watched=False), 2) is None
    assert copies_warning(two(), 2) is None
    assert copies_warning(two(in_group=False)[:1], 1) is None


def test_outcomes_have_words_exit_codes_and_the_help_lists_them():
    assert set(protocol.EXIT_CODES) == set(protocol.Outcome) == set(protocol.OUTCOME_TEXT)
    assert protocol.outcome_text("not_distributed") == "not a distributed script"
    assert protocol.outcome_text("running") == "running" and protocol.outcome_text(None) == "unknown"
    res = subprocess.run([sys.executable, "-m", "ddpstudio", "run", "--help"], capture_output=True, text=True,
                         timeout=60)
    said = " ".join(res.stdout.split())
    for state, code in protocol.EXIT_CODES.items():
        assert f"{code} {protocol.outcome_text(state)}" in said, (state, said[-600:])
