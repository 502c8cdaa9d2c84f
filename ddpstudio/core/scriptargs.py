"""A script's argparse options, read from its source, and the value each takes with the user's arguments.

The PyTorch examples' ImageNet ``main.py`` declares
``add_argument('--multiprocessing-distributed', action='store_true')`` and
spawns only when it is given (core/scriptgate.py asks). Nothing is run: the
``add_argument`` calls are read from the AST, literal defaults only; a value
that cannot be known without running the script (a computed default, an
option the launcher appends later) is :data:`UNKNOWN`.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

UNKNOWN = type("Unknown", (), {"__repr__": lambda self: "UNKNOWN"})()
NO_VALUE_ACTIONS = ("store_true", "store_false", "store_const", "count", "append_const", "help", "version")
_TYPES = {"int": int, "float": float, "str": str}


@dataclass(frozen=True)
class Option:
    """One ``add_argument`` call: its option strings, destination, action, default and constant."""

    strings: tuple[str, ...]
    dest: str
    action: str = "store"
    default: object = None
    const: object = None
    type: str | None = None
    nargs: object = None

    @property
    def takes_value(self) -> bool:
        return self.action not in NO_VALUE_ACTIONS and self.nargs != 0


@dataclass(frozen=True)
class OptionValue:
    """What an option is with the user's arguments, and whether they gave it."""

    option: Option
    value: object
    given: bool
    by_launcher: bool = False  # the launcher's template appends it: its value is not known yet

    def said(self) -> str:
        """``--multiprocessing-distributed not given`` / ``--launcher given``, for the one-line reason."""
        name = next((s for s in self.option.strings if s.startswith("--")), self.option.strings[0])
        return f"{name} " + ("set by the launcher" if self.by_launcher else "given" if self.given else "not given")


def declared_options(tree: ast.AST) -> dict[str, Option]:
    """Every optional argument a script declares (``add_argument('--x', ...)``), by destination."""
    options: dict[str, Option] = {}
    defaults: dict[str, object] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "set_defaults":
            defaults.update({kw.arg: _literal(kw.value) for kw in node.keywords if kw.arg})
        elif node.func.attr == "add_argument":
            option = _option(node)
            if option is not None:
                options[option.dest] = option
    for dest, default in defaults.items():
        if dest in options:
            options[dest] = replace(options[dest], default=default)
    return options


def parse_script(source: str | None) -> ast.Module | None:
    """A script's syntax tree, or None when it does not parse (another Python's syntax, a NUL byte)."""
    try:
        return ast.parse(source or "")
    except (SyntaxError, ValueError):
        return None


def declared_strings(tree: ast.AST) -> set[str]:
    """Every option string the script's argparse declares (``--world-size``, ``-w``...)."""
    return {s for option in declared_options(tree).values() for s in option.strings}


def option_values(options: dict[str, Option], args: Sequence[str],
                  supplied: Collection[str] = ()) -> dict[str, OptionValue]:
    """Each option's value as argparse would give it for ``args``; ``supplied`` options (the launcher's
    template appends them) are :data:`UNKNOWN`. Unknown tokens are skipped."""
    by_string = {s: o for o in options.values() for s in o.strings}
    values = {dest: OptionValue(o, _default(o), False) for dest, o in options.items()}
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            break
        if not token.startswith("-") or token == "-" or _is_number(token):
            continue
        name, eq, attached = token.partition("=")
        option = by_string.get(name) or _abbreviated(name, by_string)
        if option is None and not name.startswith("--") and len(name) > 2 and name[:2] in by_string:
            short = by_string[name[:2]]
            if short.takes_value:  # -j4
                option, eq, attached = short, "=", name[2:]
            else:  # -vm: a cluster of flags
                for letter in name[1:]:
                    flag = by_string.get("-" + letter)
                    if flag is not None and not flag.takes_value:
                        values[flag.dest] = OptionValue(flag, _flag_value(flag, values[flag.dest].value), True)
                continue
        if option is None:
            continue
        if not option.takes_value:
            values[option.dest] = OptionValue(option, _flag_value(option, values[option.dest].value), True)
            continue
        if eq:
            raw = attached
        elif i < len(args) and not (args[i].startswith("-") and not _is_number(args[i])):
            raw = args[i]
            i += 1
        else:
            raw = UNKNOWN  # nargs='?' without a value gives its const: not worth modelling
        values[option.dest] = OptionValue(option, _converted(option, raw), True)
    for dest, value in values.items():
        if supplied and any(s in supplied for s in value.option.strings):
            values[dest] = OptionValue(value.option, UNKNOWN, True, by_launcher=True)
    return values


def _option(call: ast.Call) -> Option | None:
    strings = tuple(a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    if not strings or not all(s.startswith("-") for s in strings):
        return None  # a positional argument: its tokens are skipped, it gates nothing we can read
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    long = next((s for s in strings if s.startswith("--")), strings[0])
    dest = _literal(kw["dest"]) if "dest" in kw else long.lstrip("-").replace("-", "_")
    if not isinstance(dest, str):
        return None
    action = _literal(kw["action"]) if "action" in kw else "store"
    if not isinstance(action, str):
        action = "custom"  # an Action class: its effect is not read
    default = _literal(kw["default"]) if "default" in kw else {"store_true": False, "store_false": True}.get(action)
    type_ = kw["type"].id if isinstance(kw.get("type"), ast.Name) else None
    return Option(strings, dest, action, default, _literal(kw["const"]) if "const" in kw else None, type_,
                  _literal(kw["nargs"]) if "nargs" in kw else None)


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


def _default(option: Option) -> object:
    if option.action == "custom":
        return UNKNOWN
    if isinstance(option.default, str) and option.takes_value:
        return _converted(option, option.default)  # argparse runs a string default through type, too
    return option.default


def _flag_value(option: Option, before: object) -> object:
    if option.action == "store_true":
        return True
    if option.action == "store_false":
        return False
    if option.action == "store_const":
        return option.const
    if option.action == "count":
        return (before or 0) + 1 if before is not UNKNOWN else UNKNOWN
    return UNKNOWN


def _converted(option: Option, raw: object) -> object:
    if raw is UNKNOWN or option.action != "store" or option.nargs not in (None, "?"):
        return UNKNOWN  # a list (nargs, append) or an Action class of the script's own: not modelled
    if option.type is None:
        return raw
    convert = _TYPES.get(option.type)
    try:
        return convert(raw) if convert else UNKNOWN
    except ValueError:
        return UNKNOWN


def _abbreviated(name: str, by_string: dict[str, Option]) -> Option | None:
    """argparse's allow_abbrev: a unique prefix of a long option names it."""
    if not name.startswith("--"):
        return None
    found = {id(o): o for s, o in by_string.items() if s.startswith("--") and s.startswith(name)}
    return next(iter(found.values())) if len(found) == 1 else None


def _is_number(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False
