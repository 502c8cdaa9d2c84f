""""Stopped" versus "killed", told truthfully: a process that ends on the polite request (SIGTERM) is
stopped, one that ignores it and needs SIGKILL is killed; the killer says which, and so do
``ddpstudio clean`` and the Clean up dialog. Real processes (tests/test_hygiene.py's helpers)."""

from __future__ import annotations

import signal

import pytest

from ddpstudio.core.cleanup import hygiene
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.process import killer
from ddpstudio.core.process.proctable import create_time
from tests.studio import ddpstudio
from tests.test_hygiene import IGNORES_TERM, SLEEP, procs, record  # noqa: F401  (procs is a fixture)

pytestmark = pytest.mark.posix_only("SIGTERM that a process can ignore")
READY_SLEEP = "print('ready', flush=True); " + SLEEP


def target(proc) -> killer.Target:
    return killer.Target(proc.pid, create_time(proc.pid))


def test_the_killer_says_which_ended_when_asked_and_which_needed_the_kill(procs):  # noqa: F811
    polite, stubborn = procs(READY_SLEEP, wait_ready=True), procs(IGNORES_TERM, wait_ready=True)
    result = killer.stop([target(polite), target(stubborn)], LINUX, grace_s=0.3, force_wait_s=3)
    assert sorted(result.stopped) == sorted([polite.pid, stubborn.pid]) and result.left == []
    assert result.forced == [stubborn.pid]
    assert polite.wait(5) == -signal.SIGTERM and stubborn.wait(5) == -signal.SIGKILL


def test_on_windows_every_end_is_forced(procs):  # noqa: F811
    # TerminateProcess is the only way there: nothing ends "when asked".
    proc = procs(READY_SLEEP, wait_ready=True)
    result = killer.stop([target(proc)], WINDOWS, grace_s=0.3)
    assert result.stopped == [proc.pid] and result.forced == [proc.pid]


def test_the_report_and_the_dialog_name_stopped_and_killed_apart(procs, qtbot):  # noqa: F811
    from ddpstudio.gui.cleanup_dialog import CleanupDialog
    from ddpstudio.gui.dialogs import ScriptedDialogs
    from ddpstudio.gui.workers import Workers

    polite, stubborn = procs(READY_SLEEP, wait_ready=True), procs(IGNORES_TERM, wait_ready=True)
    record("dead", ranks=[polite, stubborn])
    report = hygiene.clean(grace_s=0.3)
    assert report.forced == [stubborn.pid]
    assert [p.pid for p in report.ended_politely()] == [polite.pid]
    assert [p.pid for p in report.ended_by_force()] == [stubborn.pid]
    text = report.summary()
    assert f"Stopped 1 process (pid {polite.pid}; ended when asked)." in text
    assert f"Killed 1 process (pid {stubborn.pid}; did not end when asked)." in text
    assert report.to_dict()["forced"] == [stubborn.pid]

    workers = Workers()
    dialog = CleanupDialog(workers, ScriptedDialogs(yes=True))
    qtbot.addWidget(dialog)
    dialog._on_cleaned(report)
    shown = dialog.result_text()
    stopped_at, killed_at = shown.index("Stopped (ended when asked) (1)"), shown.index("Killed (did not end when asked) (1)")
    assert f"pid {polite.pid}" in shown[stopped_at:killed_at] and f"pid {stubborn.pid}" in shown[killed_at:]
    qtbot.waitUntil(lambda: not workers.busy, timeout=10_000)  # the dialog's first scan, if it started one


@pytest.mark.slow
def test_ddpstudio_clean_prints_stopped_and_killed(procs):  # noqa: F811
    polite, stubborn = procs(READY_SLEEP, wait_ready=True), procs(IGNORES_TERM, wait_ready=True)
    record("dead", ranks=[polite, stubborn])
    res = ddpstudio("clean", "--yes", timeout=60)
    assert res.returncode == 0, res.stderr
    assert f"Stopped 1 process (pid {polite.pid}; ended when asked)." in res.stdout
    assert f"Killed 1 process (pid {stubborn.pid}; did not end when asked)." in res.stdout
    assert polite.wait(5) == -signal.SIGTERM and stubborn.wait(5) == -signal.SIGKILL
