"""Splitting and joining command lines by the platform's rules: never POSIX ``shlex`` on Windows.

``shlex`` eats backslashes: ``shlex.split(r"--data C:\\datasets\\imagenet")`` gives
``['--data', 'C:datasetsimagenet']``. On Windows a program splits its own command line, and
python.exe (built with the Universal CRT) follows Microsoft's "Parsing C command-line arguments"
(learn.microsoft.com/cpp/c-language/parsing-c-command-line-arguments):

- arguments are separated by spaces or tabs; a double-quoted part may hold both;
- backslashes are literal unless a double quote follows them: 2n backslashes and a quote give
  n backslashes and the quote opens or closes a quoted part; 2n+1 backslashes and a quote give
  n backslashes and a literal quote;
- inside a quoted part a pair of double quotes is one literal quote, and the part goes on
  (the rule of the CRT since 2008, table row ``a"b"" c d`` -> ``ab" c d``; ``CommandLineToArgvW``
  differs here: it ends the quoted part);
- a line that ends inside a quoted part ends its last argument there (no error, unlike shlex).

Every argument here is a later one: the CRT reads ``argv[0]`` (the program) by simpler rules.
A process's command line is joined with ``subprocess.list2cmdline``, which follows the same rules.
A line for a person to paste into cmd.exe (:func:`shell_line`) must survive cmd.exe first.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence

from ddpstudio.core.platform import Platform, current

# cmd.exe acts on these outside double quotes; inside them only % (and ! with delayed expansion).
CMD_SPECIAL = frozenset('&|<>^()')
CMD_ESCAPED = frozenset('&|<>^()%"')  # what a caret escapes when an argument cannot simply be quoted


def split(line: str, platform: Platform | None = None) -> list[str]:
    """The arguments a program receives for ``line``. POSIX: ``shlex.split`` (ValueError on an open quote)."""
    if (platform or current()).is_windows:
        return split_windows(line)
    return shlex.split(line)


def join(args: Sequence[str], platform: Platform | None = None) -> str:
    """The command line (or argument text) that :func:`split` turns back into ``args``."""
    if (platform or current()).is_windows:
        return subprocess.list2cmdline(list(args))
    return shlex.join(args)


def quote(arg: str, platform: Platform | None = None) -> str:
    """One argument, quoted for a line a person pastes into the platform's shell."""
    if (platform or current()).is_windows:
        return _cmd_quote(arg)
    return shlex.quote(arg)


def shell_line(args: Sequence[str], platform: Platform | None = None) -> str:
    """A line for a console: cmd.exe on Windows (see :func:`_cmd_quote`), a POSIX shell elsewhere."""
    return " ".join(quote(a, platform) for a in args)


def pip_install_line(python: str, project: str, platform: Platform | None = None) -> str:
    """The console line that installs ``project`` into ``python``'s environment with its pip."""
    return shell_line([python, "-m", "pip", "install", project], platform)


def split_windows(line: str) -> list[str]:
    """The C runtime's split of a command line's arguments (the rules in this module's docstring)."""
    args: list[str] = []
    current_arg: list[str] = []
    in_arg = quoted = False
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in " \t" and not quoted:
            if in_arg:
                args.append("".join(current_arg))
                current_arg, in_arg = [], False
            i += 1
            continue
        in_arg = True
        if c == "\\":
            end = i
            while end < n and line[end] == "\\":
                end += 1
            count = end - i
            if end < n and line[end] == '"':
                current_arg.append("\\" * (count // 2))
                if count % 2:  # an odd count escapes the quote
                    current_arg.append('"')
                    end += 1
            else:
                current_arg.append("\\" * count)
            i = end
        elif c == '"':
            if quoted and i + 1 < n and line[i + 1] == '"':  # "" inside quotes: one literal quote, still quoted
                current_arg.append('"')
                i += 2
            else:
                quoted = not quoted
                i += 1
        else:
            current_arg.append(c)
            i += 1
    if in_arg:
        args.append("".join(current_arg))
    return args


def _cmd_quote(arg: str) -> str:
    """``arg`` for a cmd.exe line that hands it, unchanged, to a program that splits by the CRT's rules.

    cmd.exe reads a line before the program does: ``%VAR%`` expansion first (a name that is not
    defined stays as typed at the prompt), then ``^`` escapes and ``& | < > ( )`` outside double
    quotes (Stack Overflow 4094699, "How does the Windows Command Interpreter (CMD.EXE) parse
    scripts?", phases 1 and 2; Wine 8's cmd.exe removes carets first, tests/test_cmdline_wine.py). So: the argument is quoted for the CRT
    (``list2cmdline``); when that leaves a special character outside quotes it is quoted anyway,
    since inside quotes cmd.exe treats ``& | < > ^ ( )`` as text. ``%`` is expanded even inside
    quotes, and ``^`` does not escape there, so an argument with ``%`` or an embedded quote gets a
    caret before every special character and quote instead (then cmd.exe never enters a quoted
    part, the carets all go, and a ``%`` followed by ``^`` names no variable). ``!`` matters only
    with delayed expansion (``cmd /V:ON``), which an interactive cmd.exe leaves off: not escaped.
    """
    quoted = subprocess.list2cmdline([arg])
    if '%' in arg or '"' in arg:
        return "".join("^" + c if c in CMD_ESCAPED else c for c in quoted)
    if quoted.startswith('"') or not CMD_SPECIAL.intersection(arg):
        return quoted
    return _crt_quoted(arg)


def _crt_quoted(arg: str) -> str:
    """``arg`` in double quotes for the CRT: backslashes before a quote (or the closing one) doubled."""
    out, backslashes = ['"'], 0
    for c in arg:
        if c == "\\":
            backslashes += 1
            continue
        if c == '"':
            out.append("\\" * (backslashes * 2 + 1) + '"')
        else:
            out.append("\\" * backslashes + c)
        backslashes = 0
    out.append("\\" * (backslashes * 2) + '"')
    return "".join(out)
