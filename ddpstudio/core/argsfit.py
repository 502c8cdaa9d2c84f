"""The default args template in the script's own spelling, without the options it does not take.

Args style appends ``--dist-url {url} --dist-backend {backend} --world-size {world_size} --rank {rank}`` (the
PyTorch examples' ImageNet ``main.py``). argparse takes no spelling for another: a script that declares
``--world_size`` and ``--rank``, or only ``--rank`` and ``--world-size`` (it makes its own ``tcp://`` URL),
stopped at once with "unrecognized arguments". When the script's parser is visibly in the file (it calls
``parse_args``, and declares at least one of the template's options in either spelling, or builds its
``ArgumentParser`` here, declares none from a variable and hands the parser to no function) the default
template follows it: each option spelled as the script declares it, the ones it declares in neither spelling
left out (unless it declares some options from a variable, which could be them), and said; a parser that takes
none of them gets none. A template the user wrote is theirs. Read from the AST, never run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ddpstudio.core.scriptargs import declared_strings
from ddpstudio.core.scriptgate import dotted


@dataclass(frozen=True)
class Fitted:
    """The template to use, and the one-line reason when it is not the one given (None: unchanged)."""

    template: str
    why: str | None = None


def spellings(option: str) -> tuple[str, str]:
    """``--world-size`` and ``--world_size``, for either."""
    name = option[2:]
    return "--" + name.replace("_", "-"), "--" + name.replace("-", "_")


def declares_any(tree: ast.Module, options: tuple[str, ...]) -> bool:
    """Does the script's argparse declare one of ``options`` in either spelling?"""
    declared = declared_strings(tree)
    return any(s in declared for option in options for s in spellings(option))


def fit_template(template: str, tree: ast.Module | None, spawn: bool = False) -> Fitted:
    """``template`` fitted to the options the script whose syntax ``tree`` is declares (see the module's
    docstring); unchanged for a script that does not parse (None).

    ``spawn``: the template of a script that starts its own ranks, left out where the script declares none of
    its options: the scripts that pass them on to their ranks (ImageNet's ``main.py``) declare them; one whose
    library starts its ranks (Lightning, Ignite, torchrun run by the script) refuses or misreads them (a fire
    CLI hands them to ``idist.Parallel``: "got multiple values for keyword argument 'world_size'")."""
    tokens = template.split()
    options = tuple(t for t in tokens if t.startswith("--"))
    if tree is None or not options:
        return Fitted(template)
    if not (declares_any(tree, options) and strict_parser_here(tree)) and not parser_all_here(tree):
        if spawn and not declares_any(tree, options) and not declares_by_name(tree):
            return Fitted("", f"distributed arguments (none): the script declares none of {', '.join(options)}, "
                              "and sets up the ranks it starts itself")
        return Fitted(template)  # its parser, if any, may declare them elsewhere or from variables
    declared, dynamic = declared_strings(tree), declares_by_name(tree)
    kept: list[str] = []
    renamed, left_out = [], []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        value = tokens[i + 1:i + 2] if token.startswith("--") and i + 1 < len(tokens) \
            and not tokens[i + 1].startswith("--") else []
        if not token.startswith("--"):
            kept.append(token)
        else:
            spelled = next((s for s in (token, *spellings(token)) if s in declared), None)
            if spelled is None and dynamic:
                kept += [token, *value]  # it may be one of the options declared from a variable: kept
            elif spelled is None:
                left_out.append(token)
            else:
                if spelled != token:
                    renamed.append(f"{spelled} for {token}")
                kept += [spelled, *value]
        i += 1 + len(value)
    if not renamed and not left_out:
        return Fitted(template)
    fitted = " ".join(kept)
    said = [f"spelled as the script declares them ({', '.join(renamed)})"] if renamed else []
    if left_out:
        said.append(f"without {', '.join(left_out)}, which the script does not take")
    return Fitted(fitted, f"distributed arguments {fitted or '(none)'}: " + "; ".join(said))


def declares_by_name(tree: ast.Module) -> bool:
    """Is an option declared from a variable (``for name in ("--dist-url", ...): p.add_argument(name)``)? Then
    an option the script seems not to take may be one of those."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "add_argument"
               and any(not (isinstance(a, ast.Constant) and isinstance(a.value, str)) for a in node.args)
               for node in ast.walk(tree))


def strict_parser_here(tree: ast.Module) -> bool:
    """``parse_args()`` and no ``parse_known_args`` (which ignores what it does not know), and no parser built
    from ``parents=`` (whose options are declared elsewhere)."""
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    # The called name itself: ``parser.parse_args()``, and ``default_argument_parser().parse_args()`` (detectron2's
    # shape: an attribute of a call's result, which has no dotted name).
    names = {c.func.attr if isinstance(c.func, ast.Attribute) else (dotted(c.func) or "") for c in calls}
    parents = any(kw.arg == "parents" for c in calls for kw in c.keywords
                  if (dotted(c.func) or "").endswith("ArgumentParser"))
    return "parse_args" in names and "parse_known_args" not in names and not parents


def parser_all_here(tree: ast.Module) -> bool:
    """Is every option the script's parser takes declared in the file, literally? It makes its ``ArgumentParser``
    here, calls ``parse_args`` (no ``parse_known_args``, no ``parents=``), declares no option from a variable, and
    hands the parser to no function (one of another module's could add options to it)."""
    return builds_parser(tree) and strict_parser_here(tree) and not declares_by_name(tree) \
        and not _hands_parser_on(tree)


def builds_parser(tree: ast.Module) -> bool:
    """Is an ``argparse.ArgumentParser`` made in the file (not only a ``parse_args`` imported from elsewhere)?"""
    return any(_makes_parser(node) for node in ast.walk(tree))


def _makes_parser(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (dotted(node.func) or "").rpartition(".")[2] == "ArgumentParser"


def _hands_parser_on(tree: ast.Module) -> bool:
    """Is a parser made here (``p = argparse.ArgumentParser(...)``) passed to a call, ``add_my_args(p)``?"""
    parsers = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _makes_parser(node.value)
               for target in node.targets if isinstance(target, ast.Name)}
    return any(isinstance(node, ast.Call) and any(isinstance(arg, ast.Name) and arg.id in parsers
                                                  for arg in (*node.args, *(k.value for k in node.keywords)))
               for node in ast.walk(tree))
