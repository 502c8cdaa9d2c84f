"""The window's multi-machine flow (issue 13) against a real CLI node over loopback: the window hosts and
'ddpstudio join' joins with the code copied from the window; 'ddpstudio host' hosts and the window's Join
dialog joins, after refusing a bad paste and being refused by the host for a wrong token."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from ddpstudio.core import protocol
from ddpstudio.core.nodes import joincode
from ddpstudio.gui.form_state import SetupState
from tests.test_gui_window import RUN_TIMEOUT_MS, assert_nothing_left, open_window  # noqa: F401 (fixture)
from tests.test_nodes_run import Node

pytestmark = pytest.mark.gui


def settled(qtbot, window) -> None:
    """The window's background jobs (the Runs list refreshed at the run's end) are done: none is cut off
    when the test process exits (Qt would report it from the thread pool)."""
    qtbot.waitUntil(lambda: not window.workers.busy, timeout=30_000)


def real_nodes(test):
    """Real host and join processes over the loopback adapter."""
    return pytest.mark.slow(pytest.mark.posix_only("the loopback adapter is named 'lo'")(test))

TINY = SetupState(model="mlp", batch_size=8, image_size=8, max_steps=4)
LEFT = Qt.MouseButton.LeftButton


@real_nodes
def test_window_hosts_and_a_cli_node_joins_with_the_copied_code(qtbot, open_window, studio_home):
    window = open_window(TINY)
    qtbot.waitUntil(window.node_flow.host_action.isEnabled)
    dialog = window.node_flow.open_host()
    dialog.ranks.setValue(1)
    dialog.adapter.setCurrentIndex(dialog.adapter.findData("lo"))
    with qtbot.waitSignal(window.controller.join_code_received, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(dialog.host_button, LEFT)
    assert not window.node_flow.host_action.isEnabled() and not window.node_flow.join_action.isEnabled()
    panel = window.node_flow.panel
    qtbot.mouseClick(panel.copy_button, LEFT)
    code_text = QGuiApplication.clipboard().text()
    code = joincode.decode(code_text)
    said = panel.text()
    assert panel.isVisible() and "Waiting for 1 machine to join" in said
    assert f"127.0.0.1 port {code.port}" in said and "lo (127.0.0.1): chosen" in said  # the adapter's reason
    decisions = window.machine_panel.decisions.text()  # the host's plan now, not the form's one-machine plan
    assert "2 machines x 1 rank = 2 ranks" in decisions and "network adapter lo" in decisions, decisions
    assert "2 machines × 1 rank = 2 ranks" in said and joincode.mask(code.token) in said
    assert code.token not in said and panel.code_edit.echoMode() == panel.code_edit.EchoMode.Password
    assert "Node 0</b>: this machine (127.0.0.1), rank 0: joined" in said
    assert "Node 1</b>: not joined yet, rank 1: waiting" in said
    news: list[tuple[int, str]] = []
    window.controller.node_news.connect(lambda ev: news.append((ev.get("node"), ev.get("node_news"))))
    joiner = subprocess.Popen([sys.executable, "-m", "ddpstudio", "join", "-", "--join-timeout", "60"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    c = window.controller
    with qtbot.waitSignals([c.node_joined, c.run_started, c.run_finished], order="strict",
                           timeout=RUN_TIMEOUT_MS):
        joiner.stdin.write(code_text + "\n")
        joiner.stdin.close()
    out = joiner.stdout.read()
    assert joiner.wait(60) == 0, out
    assert window.metrics.final["state"] == protocol.FINISHED  # the run_finished event the window got
    assert window.progress.state_name == "finished" and panel.state.text() == "Finished" and panel.missing == 0
    assert window.metrics.step == 4 and not window.error_panel.isVisible()
    assert "2 machines × 1 rank = 2 ranks; meets at 127.0.0.1" in panel.text() and not panel.code_row.isVisible()
    # Every node with its address, ranks and state; node 1's states as the host heard them.
    assert news == [(1, "joined"), (1, "training"), (1, "finished")], news
    assert "Node 0</b>: this machine (127.0.0.1), rank 0: finished" in panel.text()
    assert f"Node 1</b>: {socket.gethostname()} (127.0.0.1), rank 1: finished" in panel.text(), panel.text()
    assert window.node_flow.host_action.isEnabled()
    for path in studio_home.rglob("*"):  # the window's settings and logs included
        if path.is_file():
            assert code.token not in path.read_text(errors="replace"), f"the token leaked into {path}"
    assert_nothing_left(qtbot, studio_home)
    settled(qtbot, window)


@real_nodes
def test_join_dialog_checks_the_paste_is_refused_for_a_wrong_token_then_joins(qtbot, open_window, studio_home):
    window = open_window()
    flow = window.node_flow
    dialog = flow.open_join()
    assert not dialog.join_button.isEnabled() and dialog.message.text() == ""
    dialog.paste.setPlainText("hello")
    assert "not a DDP Studio join code" in dialog.message.text() and not dialog.join_button.isEnabled()
    host = Node("host", "--nodes", "2", "--max-steps", "4", "--model", "mlp", "--batch-size", "8", "--image-size",
                "8", "--ranks-per-node", "1", "--ifname", "lo", "--join-timeout", "120")
    try:
        code_text = host.code()
        typo = "A" if code_text[20] != "A" else "B"
        dialog.paste.setPlainText(code_text[:20] + typo + code_text[21:])  # one character mistyped
        assert "incomplete or mistyped" in dialog.message.text() and not dialog.join_button.isEnabled()
        code = joincode.decode(code_text)
        # The host's code with another token: the host refuses it before any rank starts.
        dialog.paste.setPlainText(joincode.encode(replace(code, token="x" * len(code.token))))
        assert dialog.join_button.isEnabled()
        with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as refused:
            qtbot.mouseClick(dialog.join_button, LEFT)
        assert refused.args[0].get("state") == protocol.FAILED and window.controller.exit_code == 2
        panel = window.error_panel.text()
        assert "Could not join the run: nothing was started" in panel and "wrong token" in panel, panel
        assert not window.controller.pids and flow.join_action.isEnabled()

        dialog = flow.open_join()
        dialog.paste.setPlainText(" " + code_text[:40] + "\n" + code_text[40:])  # a chat window's line break
        preview = dialog.message.text()
        assert f"127.0.0.1 port {code.port}" in preview and "2 machines × 1 rank = 2 ranks" in preview
        assert joincode.mask(code.token) in preview and code.token not in preview
        with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
            qtbot.mouseClick(dialog.join_button, LEFT)
        assert finished.args[0].get("state") == protocol.FINISHED, window.error_panel.text()
        assert host.wait(60) == 0, host.stderr
        assert window.progress.state_name == "finished" and flow.panel.isVisible()
        assert [e.rank for e in host.of(protocol.RANK_STARTED)] == [0]
        assert set(window.metrics.loss) == {1} and window.metrics.joined == {1}  # the window ran global rank 1
        steps, losses = window.metrics.global_loss.data()  # the host's global loss, relayed through the store
        assert len(steps) >= 1 and steps[-1] == 4, steps
        host_losses = {e.get("step"): e.get("loss") for e in host.of(protocol.GLOBAL_STEP)}
        assert list(losses) == [host_losses[int(x)] for x in steps]
    finally:
        host.kill()
    assert_nothing_left(qtbot, studio_home)
    settled(qtbot, window)


@real_nodes
def test_stop_while_the_host_waits_ends_stopped_with_nothing_left(qtbot, open_window, studio_home):
    window = open_window(TINY)
    dialog = window.node_flow.open_host()
    dialog.adapter.setCurrentIndex(dialog.adapter.findData("lo"))
    with qtbot.waitSignal(window.controller.join_code_received, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(dialog.host_button, LEFT)
    qtbot.waitUntil(lambda: any("waiting up to" in e[2] for e in window.log_view.lines),  # the store is up
                    timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(window.controller.run_finished, timeout=30_000) as finished:
        qtbot.mouseClick(window.stop_button, LEFT)
    assert finished.args[0].get("state") == protocol.STOPPED and window.progress.state_name == "stopped"
    assert not window.error_panel.isVisible() and window.node_flow.panel.state.text() == "Stopped"
    assert_nothing_left(qtbot, studio_home)
    settled(qtbot, window)


def test_a_host_the_command_refuses_shows_its_one_message(qtbot, open_window, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hello')\n", encoding="utf-8")
    window = open_window(SetupState(workload="script-spawn", script_path=str(script)))
    dialog = window.node_flow.open_host()
    with qtbot.waitSignal(window.controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.mouseClick(dialog.host_button, LEFT)
        # The host command runs in the script's folder (the form's Working folder is empty), not the window's.
        assert window.controller.process.workingDirectory() == str(tmp_path)
    assert finished.args[0].get("state") == protocol.FAILED and window.controller.exit_code == 2
    said = window.error_panel.text()
    assert said.startswith("Could not host the run: nothing was started\n")
    assert "--script-style spawn cannot run over several machines" in said, said
    assert "ddpstudio: error:" not in said and not window.node_flow.panel.isVisible()
    assert window.node_flow.host_action.isEnabled() and window.launch_action.isEnabled()
    settled(qtbot, window)


def test_the_commands_carry_the_form_without_its_one_machine_fields_and_never_the_code():
    from ddpstudio.cli.main import _parser
    from ddpstudio.core.platform import current
    from ddpstudio.gui.node_commands import HostRequest, host_command, join_command

    state = replace(TINY, world_size=3, store="tcp", port=5000, model="resnet34")
    host = host_command(state, HostRequest(nodes=3, ifname="eth1", join_timeout=60), current())
    assert host[1:4] == ["-m", "ddpstudio", "host"] and host[-2:] == ["--json", "--stdin-control"]
    args = _parser().parse_args(host[3:])  # what 'ddpstudio host' will read
    assert (args.nodes, args.ranks_per_node, args.ifname, args.join_timeout) == (3, "auto", "eth1", 60.0)
    assert (args.model, args.max_steps, args.batch_size, args.stdin_control) == ("resnet34", 4, 8, True)
    assert args.world_size is None and args.store != "tcp" and args.port is None  # the host refuses those
    assert "--ranks-per-node 2" in " ".join(host_command(TINY, HostRequest(ranks_per_node=2), current()))
    shared = host_command(TINY, HostRequest(store_path=" \\\\server\\share\\pg "), current())
    assert _parser().parse_args(shared[3:]).store_path == "\\\\server\\share\\pg"  # the shared folder's file
    join = join_command(current())
    assert join[3:] == ["join", "-", "--json", "--stdin-control"]  # the code goes to stdin
    assert _parser().parse_args(join[3:]).code == "-"


def test_the_panel_lists_each_node_and_a_shared_folder_run(qtbot):
    from ddpstudio.gui.node_panel import NodePanel

    panel = NodePanel()
    qtbot.addWidget(panel)
    code = joincode.JoinCode(("192.168.1.20",), 0, "20261124-080000-ab12", 3, 2, joincode.new_token(),
                             store_path="\\\\server\\share\\pg")
    panel.show_host(joincode.encode(code), code, "eth0", "eth0 (192.168.1.20): chosen")
    said = panel.text()
    assert "Meets at:</b> store file \\\\server\\share\\pg" in said and "port" not in said, said
    assert "Node 0</b>: this machine (192.168.1.20), ranks 0-1: joined" in said
    assert "Node 2</b>: not joined yet, ranks 4-5: waiting" in said
    panel.set_node(2, "b (192.168.1.22)", "joined")
    panel.set_node(2, "", "training")  # later news keeps the address
    panel.set_node(7, "nobody", "failed")  # not a node of this run: ignored
    panel.set_run_state("running")
    said = panel.text()
    assert "Node 2</b>: b (192.168.1.22), ranks 4-5: training" in said and "nobody" not in said
    assert "Node 0</b>: this machine (192.168.1.20), ranks 0-1: training" in said
    assert "meets at \\\\server\\share\\pg through eth0" in said
    panel.set_node(1, "c (192.168.1.23)", "failed")
    panel.set_run_state("failed")
    assert "Node 1</b>: c (192.168.1.23), ranks 2-3: failed" in panel.text()
    assert "Node 0</b>: this machine (192.168.1.20), ranks 0-1: failed" in panel.text()
    panel.show_join(code)
    assert "store file \\\\server\\share\\pg" in panel.text() and not panel.node_list.isVisible()
