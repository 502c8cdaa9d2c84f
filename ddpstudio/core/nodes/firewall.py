"""Windows Defender Firewall rules that let a multi-machine run's Pythons accept connections.

Gloo connects ranks in both directions on ports it picks (any), and the
host's store listens on one port, so each machine must accept incoming TCP
for the Python programs that run the launcher and the ranks. Windows keeps
firewall rules per machine, not per user, and changing them needs an
administrator ("Administrator privileges are required to change Windows
Firewall with Advanced Security configuration settings", Microsoft's "About
Windows Firewall with Advanced Security"): a per-user rule is not possible.
So we build the ``netsh advfirewall`` commands, run them elevated when the
user agrees (one UAC prompt: ``netsh -f SCRIPT`` through ShellExecuteW's
"runas" verb), and otherwise say exactly what to allow. Qt-free; every
Windows branch takes a :class:`Platform`, and the Win32 call is made only there.

Rules apply per firewall profile (domain, private, public), and a rule for
the wrong one does nothing: a domain-joined workstation's LAN is in the
domain profile, a network Windows was told to distrust in the public one.
So the rules are made for the profile(s) of the networks this machine is on
now, as ``Get-NetConnectionProfile`` reports them (Microsoft Learn: its
``NetworkCategory`` is ``Public``, ``Private`` or ``DomainAuthenticated``; the
values are enum names, the same in every Windows language, unlike
``netsh advfirewall show currentprofile``'s text), one rule per program and
profile, and the advice names the profile.
"""

from __future__ import annotations

import ntpath
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ddpstudio.core.platform import Platform

RULE_PREFIX = "DDP Studio"
PROFILE = "private"  # when the active profile cannot be read: a LAN the user trusts
PROFILES = ("domain", "private", "public")  # netsh's names, in its order
# Get-NetConnectionProfile's NetworkCategory -> the firewall profile that applies to that network.
CATEGORIES = {"DomainAuthenticated": "domain", "Private": "private", "Public": "public"}
PROFILE_COMMAND = ["powershell.exe", "-NoProfile", "-NonInteractive", "-Command",
                   "Get-NetConnectionProfile | ForEach-Object { [string]$_.NetworkCategory }"]
SW_HIDE = 0
OFFERED_FILE = "firewall-offered"  # in the data folder: the first multi-machine run asked once


@dataclass(frozen=True)
class Rule:
    name: str
    program: str
    profile: str = PROFILE

    def add_args(self) -> list[str]:
        """The arguments after ``netsh`` that add this rule (inbound, TCP, any local port)."""
        return ["advfirewall", "firewall", "add", "rule", f"name={self.name}", "dir=in", "action=allow",
                f"program={self.program}", "protocol=TCP", "localport=any", f"profile={self.profile}", "enable=yes"]

    def show_args(self) -> list[str]:
        """``netsh`` arguments that exit 0 when the rule exists (reading rules needs no administrator)."""
        return ["advfirewall", "firewall", "show", "rule", f"name={self.name}"]


def programs(interpreters: list[str]) -> list[str]:
    """``python.exe`` and ``pythonw.exe`` beside each interpreter (the launcher's, the ranks'), once each."""
    seen: dict[str, str] = {}
    for exe in interpreters:
        folder = ntpath.dirname(exe)
        for name in ("python.exe", "pythonw.exe"):
            path = ntpath.join(folder, name)
            seen.setdefault(ntpath.normcase(path), path)
    return list(seen.values())


def node_programs(platform: Platform, executable: str | None = None, **facts) -> list[str]:
    """The programs of this install that a node runs: this Python (the node launcher) and the one ranks start
    (on Windows in a venv the base interpreter, core/launch/interpreter.py; ``facts`` go to
    ``rank_interpreter``: base_executable, in_venv, exists)."""
    from ddpstudio.core.launch.commands import console_python
    from ddpstudio.core.launch.interpreter import rank_interpreter

    exe = executable or sys.executable
    exists = facts.get("exists")
    console = console_python(exe, platform, exists) if exists else console_python(exe, platform)
    return programs([exe, rank_interpreter(console, platform, **facts).executable])


def active_profiles(platform: Platform, command: list[str] | None = None) -> tuple[str, ...]:
    """The firewall profiles of the networks this machine is connected to now, in netsh's order; empty when
    unknown (not Windows, or the command failed). ``command``: what prints one NetworkCategory a line."""
    if not platform.is_windows:
        return ()
    try:
        done = subprocess.run(command or PROFILE_COMMAND, capture_output=True, text=True, timeout=30,
                              creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = {CATEGORIES[line.strip()] for line in done.stdout.splitlines() if line.strip() in CATEGORIES}
    return tuple(p for p in PROFILES if p in found) if done.returncode == 0 else ()


def rule_name(path: str, profile: str) -> str:
    """One rule per program and profile. A private one keeps the name earlier versions gave it (private only),
    so a rule added then still counts."""
    return f"{RULE_PREFIX} ({path})" if profile == PROFILE else f"{RULE_PREFIX}, {profile} networks ({path})"


def rules(program_paths: list[str], profiles: tuple[str, ...] = (PROFILE,)) -> list[Rule]:
    return [Rule(rule_name(path, profile), path, profile) for path in program_paths for profile in profiles]


def command_line(args: list[str]) -> str:
    """As typed at a Command Prompt: ``netsh`` and the arguments, quoted the Windows way."""
    return subprocess.list2cmdline(["netsh", *args])


def script(rule_list: list[Rule]) -> str:
    """A ``netsh -f`` script adding every rule (one elevation for all of them)."""
    return "".join(subprocess.list2cmdline(r.add_args()) + "\r\n" for r in rule_list)


def advice(program_paths: list[str], port: int | None, profiles: tuple[str, ...] = ()) -> str:
    """What to allow, exactly, for a user who adds the rules by hand (or asks an administrator). ``profiles``:
    the active ones (:func:`active_profiles`); empty: unknown, and the rules are for the private profile."""
    ports = f"TCP port {port} (the host's store) and Gloo's ports: any" if port else "Gloo's ports: any"
    named = ", ".join(profiles) if profiles else (f"{PROFILE} (the profile of this machine's network could not "
                                                  "be read: check it in Settings > Network & internet)")
    lines = ["In Windows Defender Firewall on each machine of the run, allow incoming connections "
             f"(direction: inbound, protocol: TCP, {ports}; profile: {named}) for these programs:",
             *(f"  {path}" for path in program_paths),
             "or run these commands in a Command Prompt opened with 'Run as administrator':",
             *(f"  {command_line(r.add_args())}" for r in rules(program_paths, profiles or (PROFILE,)))]
    if "public" in profiles:
        lines.append("Windows classes a network this machine is on as Public: rules for the public profile let "
                     "these programs accept connections on every public network (a cafe's Wi-Fi too). If it is "
                     "your LAN, make it a private network instead (Settings > Network & internet > its "
                     "properties) and run again.")
    return "\n".join(lines)


def advice_after(exc: Exception, platform: Platform, port: int | None, programs: list[str] | None = None,
                 profiles: tuple[str, ...] | None = None) -> str | None:
    """The advice to print after a refused join, on Windows, when a firewall is the likely cause: the host's store
    could not be reached (a :class:`~ddpstudio.core.nodes.store.StoreError` with a ``failure``: the host's port),
    or the host could not connect back here (a handshake ``Refused`` that is ``blocked``: Gloo's ports)."""
    if not platform.is_windows:
        return None
    if getattr(exc, "failure", None) is not None:
        blocked_port = port
    elif getattr(exc, "blocked", False):
        blocked_port = None
    else:
        return None
    found = active_profiles(platform) if profiles is None else profiles
    return advice(programs or node_programs(platform), blocked_port, found)


def elevation_call(script_path: str) -> tuple[str, str, str, int]:
    """ShellExecuteW's verb, file, parameters and show flag that run the script elevated (one UAC prompt)."""
    return "runas", "netsh.exe", subprocess.list2cmdline(["-f", script_path]), SW_HIDE


def add_elevated(rule_list: list[Rule], folder: Path, platform: Platform) -> str | None:
    """Write the script into ``folder`` and start it elevated; None when Windows started it, else why not.

    The elevated netsh runs on its own: check with :func:`present` afterwards. Windows only.
    """
    if not platform.is_windows:
        return "firewall rules are added this way on Windows only"
    path = folder / "firewall-rules.netsh"
    path.write_text(script(rule_list), encoding="utf-8")
    import ctypes

    verb, file, params, show = elevation_call(str(path))
    code = _shell_execute_w()(None, verb, file, params, None, show)
    return elevation_outcome(code, ctypes.get_last_error())


def elevation_outcome(code: int, last_error: int) -> str | None:
    """None when ShellExecuteW started the program (it returns more than 32 then), else why not in words.

    Every failure outside its first 32 codes comes back as SE_ERR_ACCESSDENIED (5), a declined UAC prompt
    included (Raymond Chen, "Why does ShellExecute return SE_ERR_ACCESSDENIED for nearly everything?");
    the thread's last error tells the decline apart: ERROR_CANCELLED (1223).
    """
    if code > 32:
        return None
    if last_error == 1223:
        return "the administrator prompt was declined"
    return f"Windows did not start netsh elevated (ShellExecuteW returned {code}, error {last_error})"


def _shell_execute_w():
    import ctypes
    from ctypes import wintypes

    fn = ctypes.WinDLL("shell32", use_last_error=True).ShellExecuteW
    fn.argtypes = [wintypes.HWND, wintypes.LPCWSTR, wintypes.LPCWSTR, wintypes.LPCWSTR, wintypes.LPCWSTR,
                   ctypes.c_int]
    fn.restype = ctypes.c_ssize_t  # an HINSTANCE that is really a status code
    return fn


def present(rule: Rule, platform: Platform) -> bool:
    """Whether the rule exists (``netsh ... show rule`` exits 0 then). Windows only; False elsewhere."""
    if not platform.is_windows:
        return False
    try:
        done = subprocess.run(["netsh", *rule.show_args()], capture_output=True, timeout=15,
                              creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
