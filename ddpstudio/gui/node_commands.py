"""The ``ddpstudio host`` / ``ddpstudio join`` command lines the window runs in its QProcess.

The window hosts and joins through the same commands a terminal uses (in
``--json`` mode, stopped through stdin), so planning, the adapter choice, the
handshake and every refusal message stay in one place (cli/host.py, cli/join.py).
The join code never goes on a command line: ``join -`` reads it from stdin.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from ddpstudio.core.launch.commands import console_python
from ddpstudio.core.platform import Platform
from ddpstudio.gui.command_line import run_arguments
from ddpstudio.gui.form_state import SetupState

FRONT_END = ("--json", "--stdin-control")  # events on stdout; a 'stop' line (or stdin's end) stops the run


@dataclass(frozen=True)
class HostRequest:
    """What the Host dialog adds to the setup form's settings."""

    nodes: int = 2
    ranks_per_node: int = 0  # 0: auto (one per GPU, 2 on the CPU)
    ifname: str = ""  # "": the adapter chosen for you
    join_timeout: float = 300.0
    store_path: str = ""  # "": meet at this machine's port; else the FileStore on a shared folder (sharedstore)


def host_arguments(state: SetupState, request: HostRequest, platform: Platform | None = None) -> list[str]:
    """The arguments after ``ddpstudio host``: the form's run options, then the machines'.

    The form's world size and store do not apply (a host's store is its TCPStore, its
    ranks are ``--ranks-per-node``), so they are left out rather than refused."""
    args = run_arguments(replace(state, world_size=0, store="fresh", store_path="", port=0), platform)
    machines = ["--nodes", str(request.nodes),
                "--ranks-per-node", str(request.ranks_per_node) if request.ranks_per_node > 0 else "auto",
                "--join-timeout", f"{request.join_timeout:g}"]
    if request.ifname.strip():
        machines += ["--ifname", request.ifname.strip()]
    if request.store_path.strip():
        machines += ["--store-path", request.store_path.strip()]
    return before_script_args(args, machines)


def before_script_args(args: list[str], options: list[str]) -> list[str]:
    """``options`` inserted before a script's own arguments (``-- ...``), which must come last."""
    cut = args.index("--") if "--" in args else len(args)
    return [*args[:cut], *options, *args[cut:]]


def _ddpstudio(platform: Platform) -> list[str]:
    return [console_python(sys.executable, platform), "-m", "ddpstudio"]  # python.exe under pythonw too


def host_command(state: SetupState, request: HostRequest, platform: Platform) -> list[str]:
    return [*_ddpstudio(platform), "host", *before_script_args(host_arguments(state, request, platform), list(FRONT_END))]


def join_command(platform: Platform, ifname: str = "") -> list[str]:
    """``ddpstudio join -``: the code follows on stdin (see :meth:`RunController.start`)."""
    extra = ["--ifname", ifname.strip()] if ifname.strip() else []
    return [*_ddpstudio(platform), "join", "-", *extra, *FRONT_END]
