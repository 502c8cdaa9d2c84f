"""Windows firewall rules for multi-machine runs, through the platform seam: the programs, the exact netsh
commands and script, the ShellExecuteW call, the advice text, and the first-run offer (no netsh here)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from ddpstudio.cli.nodes import offer_firewall_rules
from ddpstudio.core import paths
from ddpstudio.core.nodes import firewall, handshake, reach
from ddpstudio.core.nodes.store import StoreError
from ddpstudio.core.platform import LINUX, WINDOWS

VENV = r"C:\Program Files\DDP Studio\venv\Scripts"
BASE = r"C:\Program Files\DDP Studio\python"
PROGRAMS = [rf"{VENV}\python.exe", rf"{VENV}\pythonw.exe", rf"{BASE}\python.exe", rf"{BASE}\pythonw.exe"]


def test_the_programs_are_the_pythons_of_the_launcher_and_of_the_ranks():
    # The window runs under the venv's pythonw.exe; ranks run the base interpreter (core/launch/interpreter.py).
    found = firewall.node_programs(WINDOWS, rf"{VENV}\pythonw.exe", base_executable=rf"{BASE}\python.exe",
                                   in_venv=True, exists=lambda path: True)
    assert found == PROGRAMS
    assert firewall.programs([rf"{VENV}\python.exe", rf"{VENV.upper()}\PYTHONW.EXE"]) == PROGRAMS[:2]  # once each


def test_the_netsh_commands_script_and_elevated_call_are_exact():
    rules = firewall.rules(PROGRAMS[2:])
    assert [r.name for r in rules] == [rf"DDP Studio ({BASE}\python.exe)", rf"DDP Studio ({BASE}\pythonw.exe)"]
    assert firewall.command_line(rules[0].add_args()) == (
        rf'netsh advfirewall firewall add rule "name=DDP Studio ({BASE}\python.exe)" dir=in action=allow '
        rf'"program={BASE}\python.exe" protocol=TCP localport=any profile=private enable=yes')
    assert firewall.command_line(rules[1].show_args()) == (
        rf'netsh advfirewall firewall show rule "name=DDP Studio ({BASE}\pythonw.exe)"')
    assert firewall.script(rules) == (
        rf'advfirewall firewall add rule "name=DDP Studio ({BASE}\python.exe)" dir=in action=allow '
        rf'"program={BASE}\python.exe" protocol=TCP localport=any profile=private enable=yes' "\r\n"
        rf'advfirewall firewall add rule "name=DDP Studio ({BASE}\pythonw.exe)" dir=in action=allow '
        rf'"program={BASE}\pythonw.exe" protocol=TCP localport=any profile=private enable=yes' "\r\n")
    script = r"C:\Users\ann\AppData\Local\DDP Studio\firewall-rules.netsh"
    assert firewall.elevation_call(script) == ("runas", "netsh.exe", f'-f "{script}"', 0)
    assert firewall.elevation_outcome(42, 0) is None  # above 32: started
    assert firewall.elevation_outcome(5, 1223) == "the administrator prompt was declined"  # ERROR_CANCELLED
    assert firewall.elevation_outcome(5, 5) == \
        "Windows did not start netsh elevated (ShellExecuteW returned 5, error 5)"


def test_the_advice_says_exactly_what_to_allow():
    assert firewall.advice(PROGRAMS[2:], 29500, ("private",)) == "\n".join([
        "In Windows Defender Firewall on each machine of the run, allow incoming connections (direction: inbound, "
        "protocol: TCP, TCP port 29500 (the host's store) and Gloo's ports: any; profile: private) for these "
        "programs:",
        rf"  {BASE}\python.exe",
        rf"  {BASE}\pythonw.exe",
        "or run these commands in a Command Prompt opened with 'Run as administrator':",
        rf'  netsh advfirewall firewall add rule "name=DDP Studio ({BASE}\python.exe)" dir=in action=allow '
        rf'"program={BASE}\python.exe" protocol=TCP localport=any profile=private enable=yes',
        rf'  netsh advfirewall firewall add rule "name=DDP Studio ({BASE}\pythonw.exe)" dir=in action=allow '
        rf'"program={BASE}\pythonw.exe" protocol=TCP localport=any profile=private enable=yes'])
    assert "(direction: inbound, protocol: TCP, Gloo's ports: any; profile: private)" in \
        firewall.advice(PROGRAMS, None, ("private",))


def test_elsewhere_nothing_is_added_or_asked(tmp_path):
    assert firewall.add_elevated(firewall.rules(PROGRAMS), tmp_path, LINUX) == \
        "firewall rules are added this way on Windows only"
    assert list(tmp_path.iterdir()) == [] and not firewall.present(firewall.rules(PROGRAMS)[0], LINUX)
    out = io.StringIO()
    offer_firewall_rules(LINUX, 29500, True, PROGRAMS, ask=_never, out=out)
    assert out.getvalue() == "" and not (paths.data_dir() / firewall.OFFERED_FILE).exists()


def test_the_first_run_offers_the_rules_once_and_adds_them_when_the_user_agrees():
    added: list[list[str]] = []
    rules_there: set[str] = {firewall.rules(PROGRAMS)[0].name}  # one of the four exists already

    def add(rules):
        added.append([r.name for r in rules])
        rules_there.update(r.name for r in rules)  # as the elevated netsh does
        return None

    out = io.StringIO()
    offer_firewall_rules(WINDOWS, 29500, True, PROGRAMS, present=lambda r: r.name in rules_there, add=add,
                         ask=lambda prompt: "y", out=out)
    assert added == [[r.name for r in firewall.rules(PROGRAMS)[1:]]]
    assert out.getvalue().splitlines()[-1] == "added 3 firewall rule(s): " + ", ".join(added[0])
    offer_firewall_rules(WINDOWS, 29500, True, PROGRAMS, present=lambda r: False, add=add, ask=_never, out=out)
    assert len(added) == 1  # asked once per data folder


def test_a_declined_offer_prints_the_advice():
    out = io.StringIO()
    offer_firewall_rules(WINDOWS, 29500, True, PROGRAMS[2:], present=lambda r: False, add=_never,
                         ask=lambda prompt: "n", out=out)
    text = out.getvalue()
    assert text.startswith("This is the first run over several machines here: Windows Defender Firewall must let")
    assert text.endswith("The firewall rules were not added (you chose not to add them). "
                         + firewall.advice(PROGRAMS[2:], 29500) + "\n")


def test_a_refused_elevation_prints_why_and_the_advice():
    out = io.StringIO()
    offer_firewall_rules(WINDOWS, 29500, True, PROGRAMS[2:], present=lambda r: False,
                         add=lambda rules: "the administrator prompt was declined", ask=lambda prompt: "yes", out=out)
    assert "The firewall rules were not added (the administrator prompt was declined). In Windows Defender Firewall" \
        in out.getvalue()


def _never(*args):
    raise AssertionError("not expected to be called")


def test_without_a_terminal_the_advice_is_printed_without_asking():
    out = io.StringIO()
    offer_firewall_rules(WINDOWS, 29500, False, PROGRAMS[2:], present=lambda r: False, add=_never, ask=_never, out=out)
    assert "The firewall rules were not added (no terminal to ask in). In Windows Defender Firewall" in out.getvalue()
    assert (paths.data_dir() / firewall.OFFERED_FILE).exists()


def test_a_refused_join_gets_the_advice_on_windows_when_a_firewall_is_the_likely_cause():
    dropped = StoreError("could not reach the host ...", reach.classify("10.0.0.1", 29500, TimeoutError()))
    assert firewall.advice_after(dropped, WINDOWS, 29500, PROGRAMS) == firewall.advice(PROGRAMS, 29500)
    blocked = handshake.Refused("the host refused this node: the host cannot open ...", blocked=True)
    assert firewall.advice_after(blocked, WINDOWS, 29500, PROGRAMS) == firewall.advice(PROGRAMS, None)
    assert firewall.advice_after(dropped, LINUX, 29500, PROGRAMS) is None
    for other in (StoreError("nothing listens"), handshake.Refused("wrong token")):
        assert firewall.advice_after(other, WINDOWS, 29500, PROGRAMS) is None


# A real program standing in for PowerShell's Get-NetConnectionProfile: prints one NetworkCategory a line.
def _profile_command(tmp_path: Path, *categories: str, code: int = 0) -> list[str]:
    standin = tmp_path / "netconnectionprofile.py"
    standin.write_text(f"import sys\nprint({chr(10).join(categories)!r})\nsys.exit({code})\n", encoding="utf-8")
    return [sys.executable, str(standin)]


@pytest.mark.parametrize(("categories", "profiles"), [
    (("DomainAuthenticated",), ("domain",)),
    (("Public", "Private"), ("private", "public")),  # two networks (a LAN and a Wi-Fi): netsh's order
    (("Private", "Private"), ("private",)),
    ((), ()),  # no network connected: unknown
])
def test_the_active_profiles_are_read_from_the_network_categories(tmp_path, categories, profiles):
    assert firewall.active_profiles(WINDOWS, _profile_command(tmp_path, *categories)) == profiles


def test_an_unreadable_profile_is_unknown_and_elsewhere_nothing_is_run(tmp_path):
    assert firewall.active_profiles(WINDOWS, _profile_command(tmp_path, "Private", code=1)) == ()
    assert firewall.active_profiles(WINDOWS, [str(tmp_path / "no-such-powershell.exe")]) == ()
    assert firewall.active_profiles(LINUX, _profile_command(tmp_path, "Private")) == ()
    assert firewall.PROFILE_COMMAND[-1] == "Get-NetConnectionProfile | ForEach-Object { [string]$_.NetworkCategory }"


def test_a_domain_joined_machine_gets_domain_rules_and_the_advice_names_the_profile():
    [rule] = firewall.rules(PROGRAMS[2:3], ("domain",))
    assert firewall.command_line(rule.add_args()) == (
        rf'netsh advfirewall firewall add rule "name=DDP Studio, domain networks ({BASE}\python.exe)" dir=in '
        rf'action=allow "program={BASE}\python.exe" protocol=TCP localport=any profile=domain enable=yes')
    text = firewall.advice(PROGRAMS[2:3], 29500, ("domain",))
    assert "Gloo's ports: any; profile: domain) for these programs:" in text and "profile=domain" in text
    assert "profile=private" not in text
    # A private rule keeps the name earlier versions gave it, so one added then still counts.
    assert [r.name for r in firewall.rules(PROGRAMS[2:3], ("private", "public"))] == [
        rf"DDP Studio ({BASE}\python.exe)", rf"DDP Studio, public networks ({BASE}\python.exe)"]


def test_a_public_network_is_named_with_what_its_rules_mean_and_an_unknown_one_says_so():
    text = firewall.advice(PROGRAMS[2:3], None, ("public",))
    assert "profile: public) for these programs" in text and "profile=public" in text
    assert text.splitlines()[-1].startswith("Windows classes a network this machine is on as Public")
    unknown = firewall.advice(PROGRAMS[2:3], None, ())
    assert "profile: private (the profile of this machine's network could not be read" in unknown
    assert "profile=private" in unknown


def test_the_offer_adds_rules_for_the_active_profiles_and_asks_again_on_a_new_one():
    added: list[list[str]] = []

    def add(rules):
        added.append([r.name for r in rules])
        return None

    there = lambda r: any(r.name in names for names in added)  # noqa: E731 (as the elevated netsh left them)
    out = io.StringIO()
    offer_firewall_rules(WINDOWS, 29500, True, PROGRAMS[2:3], present=there, add=add, ask=lambda p: "y", out=out,
                         profiles=("domain",))
    assert added == [[rf"DDP Studio, domain networks ({BASE}\python.exe)"]]
    offer_firewall_rules(WINDOWS, 29500, True, PROGRAMS[2:3], present=there, add=add, ask=_never, out=out,
                         profiles=("domain",))
    assert len(added) == 1  # asked once for that profile
    offer_firewall_rules(WINDOWS, 29500, True, PROGRAMS[2:3], present=there, add=add, ask=lambda p: "y", out=out,
                         profiles=("domain", "public"))
    assert added[1] == [rf"DDP Studio, public networks ({BASE}\python.exe)"]  # the new network's profile


def test_a_marker_of_an_earlier_version_counts_as_asked_for_private_only():
    paths.data_dir().mkdir(parents=True, exist_ok=True)
    (paths.data_dir() / firewall.OFFERED_FILE).write_text("asked about the firewall rules for multi-machine runs\n",
                                                          encoding="utf-8")
    out = io.StringIO()
    offer_firewall_rules(WINDOWS, 29500, False, PROGRAMS[2:3], present=lambda r: False, add=_never, ask=_never,
                         out=out, profiles=("private",))
    assert out.getvalue() == ""
    offer_firewall_rules(WINDOWS, 29500, False, PROGRAMS[2:3], present=lambda r: False, add=_never, ask=_never,
                         out=out, profiles=("public",))
    assert "profile: public) for these programs" in out.getvalue()
