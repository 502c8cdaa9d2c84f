"""Does a spawn call in a script run with the user's arguments? Read from the script's AST, never run.

The PyTorch examples' ImageNet ``main.py`` calls ``mp.spawn`` only under
``if args.multiprocessing_distributed:``; without that flag it is one process
per rank. :func:`gate` walks up from the call: the ``if``/``while``
conditions around it (in their body: must hold; in ``else``: must not), an
``if ...: return`` before it, and, when it sits in a function, the places
that function is called from. Each condition is evaluated three-valued
(true, false, unknown) over the script's argparse options
(core/scriptargs.py), ``__name__ == "__main__"`` and local names assigned
once (``use_mp = args.multiprocessing_distributed``). Unknown stays unknown:
``and``/``or`` decide only when a known part decides.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from ddpstudio.core.scriptargs import UNKNOWN, OptionValue, declared_options, option_values

PARSE_CALLS = ("parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args")
MAX_CALLERS_DEPTH = 4
_EXITS = ("exit", "_exit", "quit")
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


@dataclass(frozen=True)
class Gate:
    """What the conditions around a call make of it with these arguments.

    ``runs``: True (it runs), False (the arguments turn it off) or None (a
    condition on the arguments cannot be decided). ``condition`` and ``line``
    name the condition that decided (or could not), ``reads`` the options it
    reads with their values.
    """

    runs: bool | None
    condition: str = ""
    line: int = 0
    must_hold: bool = True  # False: the call is in the condition's ``else`` (or after its ``return``)
    reads: tuple[OptionValue, ...] = ()


@dataclass
class _Reads:
    options: dict[str, OptionValue] = field(default_factory=dict)
    args_unknown: bool = False  # read an attribute of the parsed arguments that is no known option


class _Script:
    """The parsed script with what the evaluation needs: parents, options, the names of parsed arguments."""

    def __init__(self, tree: ast.Module, args: Sequence[str], supplied: Collection[str]) -> None:
        self.tree = tree
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        options = declared_options(tree)
        self.values = option_values(options, args, supplied)
        self.args_names = _parsed_args_names(tree)
        self.changed = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                        and isinstance(n.ctx, ast.Store) and _name(n.value) in self.args_names}

    def scope_of(self, node: ast.AST) -> ast.AST:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return node
        return self.tree


def gate(tree: ast.Module, call: ast.AST, args: Sequence[str], supplied: Collection[str] = ()) -> Gate | None:
    """The gate of ``call`` with ``args``; None when no condition around it reads the script's arguments.

    ``supplied``: option strings the launcher appends (their values are not known yet).
    """
    if not declared_options(tree):
        return None  # the options are declared elsewhere (or not at all): nothing to read them by
    script = _Script(tree, args, supplied)
    return _gate(script, call, MAX_CALLERS_DEPTH, set())


def evaluator(tree: ast.Module, args: Sequence[str]) -> Callable[[ast.AST | None], object]:
    """What an expression of the script is with these arguments, or UNKNOWN: a constant, a name assigned once
    (``STRATEGY = "ddp_spawn"``), a parsed argument's value or its literal default (``args.strategy``)."""
    script = _Script(tree, args, ())
    return lambda node: UNKNOWN if node is None else _eval(script, node, _Reads(), 0)


def _gate(script: _Script, node: ast.AST, depth: int, seen: set[str]) -> Gate | None:
    undecided: Gate | None = None
    for test, must_hold in _conditions(script, node):
        reads = _Reads()
        value = _truth(_eval(script, test, reads, 0))
        if value is UNKNOWN:
            # Unknown for want of an argument's value (not of a GPU count the arguments leave alone)?
            by_arguments = reads.args_unknown or any(r.value is UNKNOWN for r in reads.options.values())
            if undecided is None and by_arguments:
                undecided = Gate(None, ast.unparse(test), test.lineno, must_hold, tuple(reads.options.values()))
            continue
        if value != must_hold:
            return Gate(False, ast.unparse(test), test.lineno, must_hold, tuple(reads.options.values()))
    function = script.scope_of(node)
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and depth > 0 and function.name not in seen:
        callers = [n for n in ast.walk(script.tree) if isinstance(n, ast.Call) and _name(n.func) == function.name]
        uses = [n for n in ast.walk(script.tree) if isinstance(n, ast.Name) and n.id == function.name]
        if callers and len(uses) == len(callers):  # else passed on (a callback): it may run from there
            gates = [_gate(script, c, depth - 1, seen | {function.name}) for c in callers]
            if all(g is not None and g.runs is False for g in gates):
                return gates[0]
            undecided = undecided or next((g for g in gates if g is not None and g.runs is None), None)
    return undecided


def _conditions(script: _Script, node: ast.AST):
    """(condition, whether it must hold) for every branch and early exit between ``node`` and its function."""
    child = node
    while child in script.parent:
        parent = script.parent[child]
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            yield parent.test, child in (parent.body if isinstance(parent.body, list) else [parent.body])
        elif isinstance(parent, ast.While) and child in parent.body:
            yield parent.test, True
        for block in _blocks(parent):
            if child in block:
                for before in block[:block.index(child)]:
                    if isinstance(before, ast.If) and _exits(before.body) != _exits(before.orelse):
                        yield before.test, not _exits(before.body)
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return
        child = parent


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    return [value for name in ("body", "orelse", "finalbody") if isinstance(value := getattr(node, name, None), list)]


def _exits(block: list[ast.stmt]) -> bool:
    """The block always leaves the function or the script (return, raise, sys.exit())."""
    if not block:
        return False
    last = block[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        name = dotted(last.value.func)
        return name is not None and name.rpartition(".")[2] in _EXITS
    return False


def _eval(script: _Script, node: ast.AST, reads: _Reads, depth: int) -> object:
    """The value of ``node`` or UNKNOWN."""
    if depth > 8:
        return UNKNOWN
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_eval(script, e, reads, depth + 1) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
    if isinstance(node, ast.Name):
        return "__main__" if node.id == "__name__" else _alias(script, node, reads, depth)
    if isinstance(node, ast.Attribute) and _name(node.value) in script.args_names:
        return _argument(script, node.attr, reads)
    if isinstance(node, ast.Call) and _name(node.func) == "getattr" and len(node.args) >= 2 \
            and _name(node.args[0]) in script.args_names and isinstance(node.args[1], ast.Constant):
        return _argument(script, str(node.args[1].value), reads)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = _truth(_eval(script, node.operand, reads, depth + 1))
        return UNKNOWN if value is UNKNOWN else not value
    if isinstance(node, ast.BoolOp):
        return _bool_op(script, node, reads, depth)
    if isinstance(node, ast.Compare):
        return _compare(script, node, reads, depth)
    if isinstance(node, ast.IfExp):
        test = _truth(_eval(script, node.test, reads, depth + 1))
        return UNKNOWN if test is UNKNOWN else _eval(script, node.body if test else node.orelse, reads, depth + 1)
    return UNKNOWN


def _argument(script: _Script, attr: str, reads: _Reads) -> object:
    found = script.values.get(attr)
    if found is None or attr in script.changed:
        reads.args_unknown = True
        return UNKNOWN
    reads.options[attr] = found
    return found.value


def _alias(script: _Script, name: ast.Name, reads: _Reads, depth: int) -> object:
    """A local name assigned exactly once (``use_mp = args.multiprocessing_distributed``), else UNKNOWN."""
    for scope in dict.fromkeys((script.scope_of(name), script.tree)):
        stores = [n for n in _own_nodes(scope) if isinstance(n, ast.Name) and n.id == name.id
                  and isinstance(n.ctx, (ast.Store, ast.Del))]
        params = isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and name.id in {
            a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}
        if params:
            return UNKNOWN
        if not stores:
            continue
        if len(stores) == 1 and isinstance(assign := script.parent.get(stores[0]), (ast.Assign, ast.AnnAssign)) \
                and assign.value is not None and (isinstance(assign, ast.AnnAssign) or assign.targets == [stores[0]]):
            return _eval(script, assign.value, reads, depth + 1)
        return UNKNOWN
    return UNKNOWN


def _own_nodes(scope: ast.AST):
    """The nodes of ``scope`` outside the functions and classes nested in it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _bool_op(script: _Script, node: ast.BoolOp, reads: _Reads, depth: int) -> object:
    """``and``/``or`` as Python evaluates them, an unknown operand deciding nothing by itself."""
    deciding = isinstance(node.op, ast.Or)  # the truth value that ends the evaluation
    unknown = False
    last: object = None
    for operand in node.values:
        last = _eval(script, operand, reads, depth + 1)
        truth = _truth(last)
        if truth is UNKNOWN:
            unknown = True
        elif truth == deciding:
            return (last if not unknown else deciding)
    return UNKNOWN if unknown else last


def _compare(script: _Script, node: ast.Compare, reads: _Reads, depth: int) -> object:
    left = _eval(script, node.left, reads, depth + 1)
    for op, right_node in zip(node.ops, node.comparators):
        right = _eval(script, right_node, reads, depth + 1)
        if left is UNKNOWN or right is UNKNOWN:
            return UNKNOWN
        try:
            if not _COMPARE[type(op)](left, right):
                return False
        except (TypeError, KeyError):
            return UNKNOWN
        left = right
    return True


def _truth(value: object) -> object:
    if value is UNKNOWN:
        return UNKNOWN
    try:
        return bool(value)
    except Exception:  # a value whose truth cannot be told here
        return UNKNOWN


def _parsed_args_names(tree: ast.AST) -> set[str]:
    """Names bound to parsed arguments: ``args = parser.parse_args()``, ``opt = parse_opt()`` whose function
    returns one, the first of ``args, rest = parser.parse_known_args()``."""

    def parses(expr: ast.AST | None, functions: set[str]) -> bool:
        return expr is not None and any(
            isinstance(n, ast.Call) and (dotted(n.func) or "").rpartition(".")[2] in (*PARSE_CALLS, *functions)
            for n in ast.walk(expr))

    functions: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(n, ast.Return) and parses(n.value, set()) for n in ast.walk(node)):
            functions.add(node.name)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and parses(node.value, functions):
            for target in node.targets:
                first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
                if isinstance(first, ast.Name):
                    names.add(first.id)
    return names


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attribute lookups on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])
