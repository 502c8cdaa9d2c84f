"""Command lines split and joined by the platform's rules (core/cmdline.py), in every place the window
and the launcher turn text into arguments: a Windows path keeps its backslashes (issue 19, item 4).

The Windows rules run here through the platform seam; tests/test_cmdline_wine.py checks them against
Windows' own code (the C runtime, CommandLineToArgvW, cmd.exe) under Wine.
"""

from __future__ import annotations

import random
import subprocess

import pytest

from ddpstudio.core import cmdline
from ddpstudio.core.plan import DEFAULT_DIST_ARGS
from ddpstudio.core.platform import LINUX, WINDOWS

# Backslashes, spaces, '&', '%' and an apostrophe (a user folder such as C:\Users\O'Brien).
PATH = r"C:\Users\O'Brien\my data\50% & more\imagenet"
CACHE = r"C:\Users\O'Brien\cache"  # no blank: list2cmdline leaves it unquoted
ARGS = ["--data", PATH, "--cache", CACHE, "--epochs", "2"]


class CpuMachine:
    gpu_count = 0
    cuda_available = False


def script_state(**changes):
    from ddpstudio.gui.form_state import SetupState

    fields = dict(workload="script-args", script_path=r"C:\my scripts\train.py",
                  script_args=cmdline.join(ARGS, WINDOWS))
    return SetupState(**{**fields, **changes})


# -- the rules ---------------------------------------------------------------------------------
# Microsoft's table ("Parsing C command-line arguments"), plus the example.
MICROSOFT_TABLE = [
    (r'"a b c"  d  e', ["a b c", "d", "e"]),
    (r'"ab\"c"  "\\"  d', ['ab"c', "\\", "d"]),
    (r'a\\\b d"e f"g h', [r"a\\\b", "de fg", "h"]),
    (r'a\\\"b c d', [r'a\"b', "c", "d"]),
    (r'a\\\\"b c" d e', [r"a\\b c", "d", "e"]),
    ('a"b"" c d', ['ab" c d']),  # "" inside quotes: a literal quote, still quoted (the CRT since 2008)
    (r"--data C:\datasets\imagenet", ["--data", r"C:\datasets\imagenet"]),
    ('"open quote at the end', ["open quote at the end"]),
    ("", []),
    ('""', [""]),
]


@pytest.mark.parametrize("line, expected", MICROSOFT_TABLE)
def test_windows_splitting_follows_the_c_runtime(line, expected):
    assert cmdline.split(line, WINDOWS) == expected


def test_posix_keeps_shlex():
    assert cmdline.split("--name 'a b' c\\ d", LINUX) == ["--name", "a b", "c d"]
    assert cmdline.join(["a b", "c"], LINUX) == "'a b' c"
    with pytest.raises(ValueError):
        cmdline.split("'open", LINUX)


TRICKY = ' \t"\\&%^|<>()!\'ab'


def tricky_lists(count: int = 400, seed: int = 19) -> list[list[str]]:
    """Argument lists made of what breaks quoting: quotes, runs of backslashes, blanks, cmd.exe's characters."""
    rng = random.Random(seed)
    lists = [[""], ["\\"], ['"'], ["\\\\\""], ["a b\\"], ["a\\\\b\\"], [' "" '], [PATH], ["%PATH%", "!x!"]]
    for _ in range(count):
        lists.append(["".join(rng.choice(TRICKY) for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(1, 5))])
    return lists


def test_split_undoes_join_for_tricky_argument_lists_under_windows_rules():
    for args in tricky_lists():
        assert cmdline.split(cmdline.join(args, WINDOWS), WINDOWS) == args, args


def test_the_windows_splitter_reads_what_subprocess_list2cmdline_writes():
    """Python's own Windows quoting (what subprocess hands CreateProcess) comes back as the same arguments."""
    for args in tricky_lists(seed=7):
        line = subprocess.list2cmdline(args)
        assert cmdline.join(args, WINDOWS) == line
        assert cmdline.split(line, WINDOWS) == args, (args, line)


def test_a_console_line_escapes_what_cmd_exe_would_act_on():
    assert cmdline.shell_line(["a&b", "<in>"], WINDOWS) == '"a&b" "<in>"'  # inside quotes cmd.exe leaves them
    assert cmdline.quote(r"C:\my data\x", WINDOWS) == r'"C:\my data\x"'  # the usual case stays readable
    # % expands even inside quotes: carets everywhere instead, so that no %NAME% is ever a variable.
    assert cmdline.quote("50% & more", WINDOWS) == '^"50^% ^& more^"'
    assert cmdline.quote("%PATH%", WINDOWS) == "^%PATH^%"
    assert cmdline.quote("a b", LINUX) == "'a b'"


# -- every place that turns text into arguments -----------------------------------------------
def a_script(folder) -> str:
    script = folder / "train.py"
    script.write_text("import torch\n", encoding="utf-8")
    return str(script)


def planned(state):
    from ddpstudio.gui.preflight import preflight

    checked = preflight(state, CpuMachine(), WINDOWS)
    assert checked.plan is not None, checked
    return checked.plan


def test_the_form_state_keeps_a_windows_path(tmp_path):
    from ddpstudio.gui.form_state import from_plan

    state = script_state(workload="script-env", script_path=a_script(tmp_path))
    assert state.to_request(WINDOWS).script.args == ARGS
    plan = planned(state)
    assert plan.script.args == ARGS
    again = from_plan(plan, WINDOWS)  # "run again" of a run whose form was not saved
    assert again.script_args == cmdline.join(ARGS, WINDOWS)
    assert again.to_request(WINDOWS).script.args == ARGS


def test_the_style_offer_reads_windows_arguments(qtbot, tmp_path):
    """A script whose arguments ask for its own ranks gets the spawn-style offer, even with a Windows
    path among them (POSIX shlex cannot split the apostrophe, so it saw no arguments at all)."""
    from ddpstudio.gui.dialogs import ScriptedDialogs
    from ddpstudio.gui.setup_form import SetupForm

    script = a_script(tmp_path)
    form = SetupForm(ScriptedDialogs(yes=True), platform=WINDOWS)
    qtbot.addWidget(form)
    form.set_state(script_state(script_path=script, script_args=""))
    form.editors["script_args"].setText(cmdline.join([*ARGS, "--multiprocessing-distributed"], WINDOWS))  # typed
    assert form.style_offer.suggestion is not None
    assert form.state().workload == "script-spawn"
    assert form.state().to_request(WINDOWS).script.args == [*ARGS, "--multiprocessing-distributed"]


def test_copy_as_command_keeps_a_windows_path():
    from ddpstudio.gui.command_line import command_line, run_arguments

    state = script_state(script_cwd=r"D:\work & play")
    assert run_arguments(state, WINDOWS)[-len(ARGS) - 1:] == ["--", *ARGS]
    line = command_line(state, WINDOWS)
    assert line.startswith('cd /d "D:\\work & play" && ddpstudio run --script "C:\\my scripts\\train.py" ')
    assert line.endswith(r' -- --data ^"C:\Users\O' "'" r'Brien\my data\50^% ^& more\imagenet^" --cache '
                         + CACHE + " --epochs 2")


def test_the_host_dialog_command_keeps_a_windows_path():
    from ddpstudio.gui.node_commands import HostRequest, host_command

    command = host_command(script_state(), HostRequest(nodes=2), WINDOWS)
    assert command[-len(ARGS) - 1:] == ["--", *ARGS]


def test_the_dist_args_template_keeps_a_windows_path(monkeypatch, tmp_path):
    from ddpstudio.core.launch.commands import dist_args, rank_command

    template = f"{DEFAULT_DIST_ARGS} --data {cmdline.join([PATH], WINDOWS)} --cache {CACHE}"
    plan = planned(script_state(dist_args=template, script_path=a_script(tmp_path), store="tcp"))
    assert dist_args(template, plan, 1, WINDOWS)[-4:] == ["--data", PATH, "--cache", CACHE]
    monkeypatch.setenv("DDPSTUDIO_PLATFORM", "windows")  # the launcher's own platform, through the seam
    assert rank_command(plan, 1, "plan.json")[-4:] == ["--data", PATH, "--cache", CACHE]


def test_the_del_advice_is_a_console_line():
    from ddpstudio.core.cleanup.hygiene import _not_ours_message

    assert 'delete it (del ^"C:\\pg\\50^% ^& more^")' in _not_ours_message(r"C:\pg\50% & more", WINDOWS)
