"""Reading the launcher's plan file with one clear error for anything unusable.

Front ends write plans with :meth:`Plan.write`; a hand-edited, truncated or
foreign file must not end the launcher in a traceback with no ``run_finished``
(the protocol promises one), so every field is checked against its type here.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

from ddpstudio.core.plan import Plan, RecipeSpec, ScriptSpec


class PlanError(ValueError):
    """The plan cannot be used; ``str()`` says why, for the user."""


def read_plan(path: str) -> Plan:
    """The plan at ``path``, or :class:`PlanError` naming what is wrong with it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"the plan file {path} does not exist") from None
    except IsADirectoryError:
        raise PlanError(f"the plan file {path} is a folder") from None
    except UnicodeDecodeError:
        raise PlanError(f"the plan file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise PlanError(f"cannot read the plan file {path}: {exc.strerror or exc}") from None
    if not text.strip():
        raise PlanError(f"the plan file {path} is empty")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"the plan file {path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    _check(raw, Plan, "the plan")
    for key, spec in (("recipe", RecipeSpec), ("script", ScriptSpec)):
        if raw.get(key) is not None:
            _check(raw[key], spec, f"the plan's {key}")
    if not raw.get("recipe") and not raw.get("script"):
        raise PlanError(f"the plan file {path} names neither a recipe nor a script to run")
    if raw["world_size"] < 1:
        raise PlanError(f"the plan file {path} asks for {raw['world_size']} ranks; it needs at least 1")
    try:
        return Plan.from_dict(raw)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"the plan file {path} cannot be used ({exc})") from None


def _check(raw: Any, cls: type, what: str) -> None:
    if not isinstance(raw, dict):
        raise PlanError(f"{what} is a JSON {type(raw).__name__}, not an object; write it with a DDP Studio front end")
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name not in raw:
            if required:
                raise PlanError(f"{what} has no {f.name!r}")
            continue
        if f.name in ("recipe", "script"):
            continue  # checked on their own
        if not _fits(raw[f.name], hints[f.name]):
            raise PlanError(f"{what}'s {f.name!r} is {raw[f.name]!r}, which is not {_name(hints[f.name])}")


def _fits(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    if origin is dict:
        key, item = typing.get_args(hint)
        return isinstance(value, dict) and all(_fits(k, key) and _fits(v, item) for k, v in value.items())
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _name(hint: Any) -> str:
    names = {str: "text", int: "a whole number", float: "a number", bool: "true or false"}
    if hint in names:
        return names[hint]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(args) == 1 and len(typing.get_args(hint)) == 2:
        return _name(args[0]) + " or null"
    return str(hint).replace("typing.", "")
