"""``--balance``: equal batches, or batches sized for each rank's measured speed (mixed GPUs, issue 25 §1).

``auto`` balances only when the ranks' devices differ (two GPU names among the run's GPUs): identical GPUs
and CPU ranks run at the same speed, and a measurement would only add noise. ``measured`` forces it (on the
CPU too: how the tests and ``benchmarks/balance.py`` exercise it, with one rank slowed through
``DDPSTUDIO_SLOW_RANK``, rank/balance.py).
"""

from __future__ import annotations

from typing import Sequence

from ddpstudio.core.decision import Decision

BALANCE_CHOICES = ("auto", "equal", "measured")


class BalanceError(ValueError):
    """An unknown ``--balance`` value."""


def choose_balance(requested: str, device: str, gpu_names: Sequence[str], world_size: int,
                   global_batch: int) -> Decision:
    """The recipe's balance mode (``equal`` or ``measured``) and the plan's words for it."""
    if requested not in BALANCE_CHOICES:
        raise BalanceError(f"unknown balance {requested!r}: choose {', '.join(BALANCE_CHOICES)}")
    kept = (f"each rank's batch sized for its measured speed after its first passes, the global batch of "
            f"{global_batch} kept and the gradients weighted by each rank's share")
    if world_size < 2 or requested == "equal":
        why = "one rank" if world_size < 2 else "--balance equal"
        return Decision("equal", f"equal batches on every rank ({why})")
    if requested == "measured":
        return Decision("measured", f"{kept} (--balance measured)")
    names = list(gpu_names)[:world_size] if device == "cuda" else []
    if len(set(names)) > 1:
        return Decision("measured", f"{kept}: the GPUs differ ({', '.join(names)})")
    # The default on CPU ranks and identical GPUs: nothing to explain, so no line in the plan's reasons (each
    # line is a line of the window's decisions panel, which must leave the form in view on a laptop).
    return Decision("equal", "")
