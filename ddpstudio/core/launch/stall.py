"""What the launcher knows when the rendezvous stalls: who has not joined, and the likely reasons.

The watchdog (``Launcher._watchdog``) fires once, ``rendezvous_timeout + 5``
seconds after the start, if a rank has not joined; these facts become the
message (and, unless it is a quiet script, the run's root cause).
"""

from __future__ import annotations

from ddpstudio.core.launch.rankproc import RankProc
from ddpstudio.core.plan import Plan


def stall_facts(plan: Plan, ranks: list[RankProc], store_preexisted: bool) -> list[str]:
    """Which ranks had not joined, which died first, a store file left behind, a port someone else holds."""
    waiting = [r.rank for r in ranks if not r.joined]
    facts = [f"rank(s) {', '.join(map(str, waiting))} had not joined after {plan.rendezvous_timeout:g} s"]
    dead = [r.rank for r in ranks if r.exit_code is not None and not r.joined]
    if dead:
        facts.append(f"rank(s) {', '.join(map(str, dead))} exited before joining")
    if store_preexisted:
        facts.append(f"the store file {plan.store_path} existed before this run started: "
                     "a killed run left it behind; run 'ddpstudio clean'")
    if plan.store == "tcp" and plan.master_port:
        from ddpstudio.core.rendezvous.ports import port_owner

        owner = port_owner(plan.master_port)
        if owner and owner.get("pid") not in {r.proc.pid for r in ranks}:
            facts.append(f"port {plan.master_port} is held by another process ({owner.get('name')}, "
                         f"pid {owner.get('pid')})")
    if plan.script is not None and waiting:  # the one way to wait longer (issue 27)
        facts.append("a script that works longer than that before init_process_group needs a longer "
                     "--rendezvous-timeout")
    return facts
