"""What the setup window offers when: the Tk-free model, and the real Tk window if a display exists."""

from __future__ import annotations

import os
import threading

import pytest

from ddpstudio.bootstrap import failure
from ddpstudio.bootstrap.environment import STEPS, Options
from ddpstudio.bootstrap.events import Failed, Finished, LogLine, StepStarted
from ddpstudio.bootstrap.progress import STEP_WEIGHTS, ProgressModel
from ddpstudio.core.platform import LINUX


def test_weights_cover_every_step():
    assert len(STEP_WEIGHTS) == len(STEPS)


def test_running_then_done():
    model = ProgressModel()
    assert model.percent == 0 and not model.can_retry and not model.can_start_app
    model.apply(StepStarted(1, 5, STEPS[0]))
    model.apply(StepStarted(3, 5, STEPS[2]))
    assert model.headline == f"Step 3 of 5: {STEPS[2]}"
    assert 0 < model.percent < 50
    model.apply(LogLine("Resolved 40 packages"))
    model.apply(Finished({}))
    assert model.percent == 100 and model.can_start_app and not model.can_retry
    assert model.log == ["Resolved 40 packages"]


def test_failure_offers_retry_and_only_sometimes_the_cpu_build():
    model = ProgressModel()
    model.apply(StepStarted(1, 5, STEPS[0]))
    model.apply(Failed(failure.network("PyTorch")))
    assert model.state == "failed" and model.can_retry and not model.can_use_cpu
    assert "internet" in model.message
    model.restart()
    assert model.state == "running" and not model.can_retry and model.log[-1] == "---- retry ----"
    model.apply(Failed(failure.no_gpu_build("The driver supports CUDA 11.4; cu126 needs 12.0.", driver_update_helps=True)))
    assert model.can_retry and model.can_use_cpu and not model.can_set_network


def test_a_network_failure_offers_the_network_settings():
    model = ProgressModel()
    model.apply(Failed(failure.network("Python")))
    assert model.can_set_network and model.can_retry
    for host in ("pypi.org", "files.pythonhosted.org", "download.pytorch.org", "releases.astral.sh", "github.com"):
        assert host in model.message
    assert "Network settings" in model.message


@pytest.mark.parametrize(
    "made",
    [
        failure.not_on_index("https://download.pytorch.org/whl/cu128", "torch==2.14.1 and torchvision==0.29.1"),
        failure.no_gpu_build("No single PyTorch 2.14.1 build runs on all these GPUs: ...", driver_update_helps=False),
    ],
)
def test_failures_retry_cannot_fix_offer_only_the_cpu_build(made):
    """Never an endless Retry: where the same attempt fails the same way, the CPU build is the way on."""
    model = ProgressModel()
    model.apply(Failed(made))
    assert model.state == "failed" and not model.can_retry and model.can_use_cpu and not model.can_set_network


def test_download_lines_move_the_bar_inside_the_install_step():
    model = ProgressModel()
    model.apply(StepStarted(3, 5, STEPS[2]))
    start = model.percent
    for line in ("Resolved 40 packages in 1.2s", "Downloading torch (2.4GiB)", "Downloading pyside6-essentials (100.0MiB)",
                 "Downloading cuda-bindings (8.0MiB)", " Downloaded cuda-bindings", " Downloaded pyside6-essentials"):
        model.apply(LogLine(line))
    partly = model.percent
    model.apply(LogLine(" Downloaded torch"))
    assert start < partly < model.percent
    assert model.downloads.fraction == pytest.approx(0.9)  # unpacking still to come
    model.apply(LogLine("Installed 40 packages in 2.1s"))
    assert model.percent == pytest.approx(100 * (2 + 8 + 75) / 100)
    model.apply(LogLine(" Downloaded something-never-announced"))  # ignored, not a crash
    model.apply(StepStarted(4, 5, STEPS[3]))
    assert model.downloads.fraction == 0.0 and model.percent == pytest.approx(85)


def test_done_message_depends_on_the_start_button():
    for offered, words in ((True, "Start DDP Studio"), (False, "Close this window")):
        model = ProgressModel(start_offered=offered)
        model.apply(Finished({}))
        assert words in model.message


def _display() -> bool:
    if not os.environ.get("DISPLAY"):
        return False
    from ddpstudio.bootstrap import window

    return window.available()


@pytest.mark.skipif(not _display(), reason="needs a display (run under xvfb-run)")
def test_window_retry_after_failure(tmp_path):
    """The real Tk window: a failing attempt shows its message and Retry; Retry runs again and succeeds."""
    from ddpstudio.bootstrap.window import ProgressWindow

    attempts: list[int] = []

    def fake_attempt(options, sink, running):  # the setup itself is tested for real elsewhere
        attempts.append(1)
        sink(StepStarted(1, 5, STEPS[0]))
        if len(attempts) == 1:
            sink(Failed(failure.network("PyTorch")))
        else:
            sink(Finished({}))

    started: list[bool] = []
    win = ProgressWindow(Options(root=tmp_path, platform=LINUX), start_app=lambda: started.append(True), run_attempt=fake_attempt)

    def drive() -> None:
        win.root.update()
        if win.model.state == "failed" and len(attempts) == 1:
            assert win.retry_button.winfo_ismapped() and not win.cpu_button.winfo_ismapped()
            assert "internet" in win.message.cget("text")
            win.retry_button.invoke()
        elif win.model.state == "done":
            assert win.start_button.winfo_ismapped() and not win.retry_button.winfo_ismapped()
            win.start_button.invoke()
            return
        win.root.after(50, drive)

    win.root.after(50, drive)
    deadline = threading.Timer(20, win.root.quit)
    deadline.start()
    try:
        code = win.run()
    finally:
        deadline.cancel()
    assert code == 0 and started == [True] and len(attempts) == 2
    assert not [t for t in threading.enumerate() if t.name == "ddpstudio-bootstrap"]  # the workers are gone


@pytest.mark.skipif(not _display(), reason="needs a display (run under xvfb-run)")
def test_window_offers_network_settings_after_a_download_failure(tmp_path):
    """The real Tk window: a network failure shows "Network settings..."; its dialog opens; saving
    writes network.json (which uv's environment then carries) and tries again."""
    from ddpstudio.bootstrap import network
    from ddpstudio.bootstrap.layout import Layout
    from ddpstudio.bootstrap.uv import Uv
    from ddpstudio.bootstrap.window import ProgressWindow

    attempts: list[int] = []

    def fake_attempt(options, sink, running):
        attempts.append(1)
        sink(StepStarted(1, 5, STEPS[0]))
        sink(Failed(failure.network("Python")) if len(attempts) == 1 else Finished({}))

    win = ProgressWindow(Options(root=tmp_path, platform=LINUX), start_app=lambda: None, run_attempt=fake_attempt)
    seen: dict[str, bool] = {}

    def drive() -> None:
        win.root.update()
        if win.model.state == "failed" and len(attempts) == 1 and "dialog" not in seen:
            seen["button"] = bool(win.network_button.winfo_ismapped())
            win.network_button.invoke()
            seen["dialog"] = any(w.winfo_class() == "Toplevel" for w in win.root.winfo_children())
            for w in win.root.winfo_children():
                if w.winfo_class() == "Toplevel":
                    w.destroy()
            win.save_network(network.NetworkSettings("http://proxy.example:8080", True, ""))
        elif win.model.state == "done":
            win.start_button.invoke()
            return
        win.root.after(50, drive)

    win.root.after(50, drive)
    deadline = threading.Timer(20, win.root.quit)
    deadline.start()
    try:
        code = win.run()
    finally:
        deadline.cancel()
    assert code == 0 and seen == {"button": True, "dialog": True} and len(attempts) == 2
    layout = Layout(tmp_path, LINUX)
    env = Uv(layout, tmp_path / "uv", base_env={}).environment()
    assert env["HTTPS_PROXY"] == "http://proxy.example:8080" and env["UV_SYSTEM_CERTS"] == "true"
