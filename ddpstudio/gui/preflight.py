"""Everything checked before Launch, off the GUI thread: the form's problems or the plan it gives.

:func:`preflight` runs while the user types (the plan's reasons fill the
machine panel); :func:`prepare_launch` runs once on Launch and also handles a
leftover on a fixed store path and writes the run directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ddpstudio.core.cleanup.hygiene import prelaunch_check, prelaunch_script_stores
from ddpstudio.core.plan import Plan
from ddpstudio.core.platform import Platform
from ddpstudio.core.policy import PolicyError, build_plan, write_plan
from ddpstudio.core.recipefit import check_plan
from ddpstudio.core.validate import Problem, check_request
from ddpstudio.gui.form_state import FieldError, SetupState

SETUP_FILE = "gui-setup.json"  # the form, saved in the run directory for "run again"


@dataclass(frozen=True)
class Preflight:
    problems: tuple[Problem, ...] = ()
    plan: Plan | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and self.plan is not None


@dataclass(frozen=True)
class LaunchReady:
    preflight: Preflight
    store_notes: list[str] = field(default_factory=list)  # what the fixed-store check did, in words


def preflight(state: SetupState, machine, platform: Platform) -> Preflight:
    """Validate the form and build a plan (not written anywhere)."""
    try:
        request = state.to_request(platform)
    except FieldError as exc:
        return Preflight((Problem(exc.field, str(exc)),))
    problems = check_request(request, platform)
    if problems:
        return Preflight(tuple(problems))
    try:
        plan = build_plan(request, platform, machine)
    except PolicyError as exc:
        return Preflight((Problem(exc.field or "workload", str(exc)),))
    except ValueError as exc:  # a store path torch cannot use, from storeurl
        return Preflight((Problem("store_path" if state.store == "fixed" else "workload", str(exc)),))
    fit = check_plan(plan, request.oversubscribe)  # the data, the model and the machine against the plan
    return Preflight(tuple(fit)) if fit else Preflight(plan=plan)


def prepare_launch(state: SetupState, machine, platform: Platform) -> LaunchReady:
    """Preflight again (fresh run id and port), clear a fixed store's leftover, write the run folder."""
    checked = preflight(state, machine, platform)
    if not checked.ok:
        return LaunchReady(checked)
    plan = checked.plan
    notes: list[str] = []
    if plan.store_is_fixed and plan.store_path:
        result = prelaunch_check(plan.store_path)  # removes our own leftover there, says so
        if result.cleaned or result.killed or not result.ok:
            notes.append(result.message)
        if not result.ok:
            return LaunchReady(Preflight((Problem("store_path", result.message),)), notes)
    if plan.script is not None:
        result = prelaunch_script_stores(plan.script.path)  # its own FileStore, left by a killed run of ours
        if result.message:
            notes.append(result.message)
        if not result.ok:
            return LaunchReady(Preflight((Problem("script_path", result.message),)), notes)
    path = write_plan(plan)
    (path.parent / SETUP_FILE).write_text(json.dumps(state.to_dict(), indent=2), encoding="utf-8")
    return LaunchReady(checked, notes)

