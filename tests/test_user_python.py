"""A script's ranks run in the Python the user chose (``--python``, the window's Python field): an environment of
their own, with their script's packages, checked before any rank starts (core/userpython.py), with DDP Studio's
rank helper loaded into it from DDP Studio's folder and nothing else of DDP Studio's environment.

The environments are real: virtual environments made here from this suite's own interpreter; the one with
PyTorch reaches this suite's torch through a ``.pth`` line, which does not bring DDP Studio along (an editable
install's own ``.pth`` is read only in a site folder)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from ddpstudio.core import protocol, userpython
from ddpstudio.core.platform import LINUX, WINDOWS, current
from ddpstudio.core.userpython import PythonFacts, UserPythonError, problem
from ddpstudio.gui.command_line import run_arguments
from ddpstudio.gui.form_state import SetupState, from_plan
from tests.conftest import processes_of
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type
from tests.test_bad_input import assert_nothing_started, assert_rejected


def _venv(root: Path, with_torch: bool) -> Path:
    base = getattr(sys, "_base_executable", "") or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120,
                   stdin=subprocess.DEVNULL, capture_output=True)
    if with_torch:
        site = sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)})
        Path(site, "suite_torch.pth").write_text(str(Path(torch.__file__).resolve().parents[1]) + "\n")
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@pytest.fixture(scope="module")
def envs(tmp_path_factory) -> dict[str, Path]:
    """Two environments of the user's: one with PyTorch and without DDP Studio, one without PyTorch."""
    where = tmp_path_factory.mktemp("user-envs")
    found = {"torch": _venv(where / "with torch", True), "bare": _venv(where / "bare", False)}
    probe = subprocess.run([str(found["torch"]), "-c", "import importlib.util as u, torch; "
                            "print(torch.__version__, u.find_spec('ddpstudio') is None)"],
                           capture_output=True, text=True, timeout=120, cwd=where, stdin=subprocess.DEVNULL)
    assert probe.stdout.split() == [torch.__version__, "True"], probe.stderr  # torch there, DDP Studio not
    return found


def test_the_check_reads_a_real_environment_and_keeps_only_a_good_result(envs):
    facts = userpython.check(str(envs["torch"]), current(), needs_cuda=False, helper=True)
    assert facts.path == str(envs["torch"].absolute()) and facts.torch == torch.__version__
    assert facts.version[:2] == sys.version_info[:2] and facts.in_venv
    assert facts.reason().startswith(f"your script runs in {facts.path} (Python {facts.version_text}, torch "
                                     f"{torch.__version__}")
    assert facts.reason().endswith("; the rank helper comes from DDP Studio's folder, nothing else of its environment")
    # --no-rank-helper: nothing of DDP Studio's runs there (helper trial 2026-12-08: the plan said the helper did)
    assert facts.reason(helper=False).endswith("; nothing of DDP Studio's environment")
    # The environment's folder names its python too.
    assert userpython.check(str(envs["torch"].parents[1]), current(), needs_cuda=False, helper=True) == facts
    with pytest.raises(UserPythonError) as caught:
        userpython.check(str(envs["bare"]), current(), needs_cuda=False, helper=True)
    said = str(caught.value)
    assert f"{envs['bare'].absolute()} (Python {facts.version_text}) cannot import torch (ModuleNotFoundError: " \
           "No module named 'torch'): install PyTorch there (" in said and "-m pip install torch)" in said
    assert not any(key[0] == os.path.normcase(str(envs["bare"].absolute())) for key in userpython._checked)


def test_what_is_not_a_usable_python_is_said_in_one_line(tmp_path):
    with pytest.raises(UserPythonError, match=r"there is no .*nowhere.*leave Python empty to use DDP Studio's own"):
        userpython.resolve(str(tmp_path / "nowhere" / "python"), LINUX)
    with pytest.raises(UserPythonError, match="is a folder without bin/python or bin/python3 in it"):
        userpython.resolve(str(tmp_path), LINUX)
    with pytest.raises(UserPythonError, match=r"without python\.exe or Scripts.python\.exe in it"):
        userpython.resolve(str(tmp_path), WINDOWS)
    other = os.environ.get("COMSPEC", "") if os.name == "nt" else shutil.which("sh")  # a real program, not Python
    with pytest.raises(UserPythonError, match=r"did not run as Python \(exit code -?\d+: .*\); give a python "):
        userpython.check(other, current(), needs_cuda=False, helper=True)


def _facts(version=(3, 11, 7), torch_version="2.14.1", cuda="13.0") -> PythonFacts:
    return PythonFacts(path="/envs/ml/bin/python", version=version, prefix="/envs/ml", base_prefix="/usr",
                       base_executable="/usr/bin/python3", torch=torch_version, cuda=cuda,
                       torch_error=None if torch_version else "ModuleNotFoundError: No module named 'torch'")


def test_which_interpreters_can_run_the_ranks():
    assert problem(_facts(), needs_cuda=True, helper=True) is None
    assert "is Python 2.7.18; PyTorch needs Python 3" in problem(_facts((2, 7, 18), None, None), needs_cuda=False,
                                                                 helper=False)
    old = problem(_facts((3, 9, 18)), needs_cuda=False, helper=True)
    assert "rank helper" in old and "Python 3.10 or newer" in old and "--no-rank-helper" in old
    assert problem(_facts((3, 9, 18)), needs_cuda=False, helper=False) is None  # without the helper it may
    cpu = problem(_facts(cuda=None), needs_cuda=True, helper=True)
    assert "(2.14.1) is a CPU-only build, and this run trains on the GPUs" in cpu
    assert problem(_facts(cuda=None), needs_cuda=False, helper=True) is None


def test_the_command_line_refuses_a_missing_python_and_a_python_for_the_recipe(studio_home, tmp_path):
    script = str(SCRIPTS / "which_python.py")
    line = assert_rejected(ddpstudio("run", "--script", script, "--python", str(tmp_path / "nope" / "python")),
                           "there is no", "leave Python empty")
    assert line.count("ddpstudio: error:") == 1
    assert_rejected(ddpstudio("run", "--python", sys.executable), "--python is for your own script (--script)")
    assert_rejected(ddpstudio("run", "--script", script, "--python", ""), "--python is empty")
    assert_nothing_started(studio_home)


def test_the_window_keeps_the_python_in_copy_as_and_in_a_run_loaded_again():
    state = SetupState(workload="script-env", script_path="/w/train.py", script_python=" /envs/ml/bin/python ")
    assert run_arguments(state, LINUX)[-2:] == ["--python", "/envs/ml/bin/python"]
    request = state.to_request(LINUX)
    assert request.script.python == "/envs/ml/bin/python"
    assert SetupState(workload="script-env", script_path="/w/train.py").to_request(LINUX).script.python is None

    from ddpstudio.core.plan import Plan, ScriptSpec

    plan = Plan(run_id="r", run_dir="/r", world_size=2, backend="gloo", device="cpu", store="file",
                init_method="file:///s", script=ScriptSpec(path="/w/train.py", python="/envs/ml/bin/python"))
    assert from_plan(Plan.from_dict(json.loads(json.dumps(plan.to_dict()))), LINUX).script_python == \
        "/envs/ml/bin/python"


@pytest.mark.slow
def test_the_ranks_run_in_the_chosen_environment_with_the_rank_helper(studio_home, envs):
    res = ddpstudio("run", "--json", "--script", str(SCRIPTS / "which_python.py"), "--python", str(envs["torch"]),
                    "--script-style", "env", "--world-size", "2", "--grad-exchange", "staged",
                    "--rendezvous-timeout", "60")
    assert res.returncode == 0, res.stderr + res.stdout[-3000:]
    evs = events(res.stdout)
    started = of_type(evs, protocol.RUN_STARTED)[0]
    python = str(envs["torch"].absolute())
    assert any(r.startswith(f"your script runs in {python} (Python ") for r in started.get("reasons"))
    plan = json.loads((Path(started.get("run_dir")) / "plan.json").read_text(encoding="utf-8"))
    assert plan["script"]["python"] == str(envs["torch"])
    assert plan["env"][userpython.PACKAGE_DIR_ENV] == userpython.package_dir()
    lines: dict[int, list[str]] = {0: [], 1: []}
    for e in of_type(evs, protocol.LOG):
        if e.get("stream") == "stdout":
            lines[e.rank].append(e.get("line"))
    prefix = str(envs["torch"].parents[1].absolute())
    for rank in (0, 1):
        assert f"rank {rank} prefix {prefix}" in lines[rank], lines[rank]
        assert f"rank {rank} own ddpstudio False" in lines[rank]  # the environment has no DDP Studio of its own
        assert f"rank {rank} comm hooks: ['staged_hook']" in lines[rank]  # yet the helper ran, from our folder
    joined = of_type(evs, protocol.RANK_JOINED)  # the helper's report as the ranks met
    assert sorted(e.rank for e in joined) == [0, 1]
    assert final(evs).get("state") == protocol.FINISHED
    assert not processes_of(studio_home)



def test_a_script_started_from_another_active_environment_is_told_how_to_run_there(tmp_path):
    note = userpython.active_environment_note({"VIRTUAL_ENV": r"C:\work\.venv"}, r"C:\Apps\DDPStudio\env", WINDOWS)
    assert note == (r"the environment C:\work\.venv is active (VIRTUAL_ENV), but your script's ranks run in DDP "
                    r"Studio's own Python; to run them in that environment, give --python C:\work\.venv\Scripts"
                    r"\python.exe (the window: Python)")
    conda = userpython.active_environment_note({"CONDA_PREFIX": "/opt/conda/envs/ml"}, sys.prefix, LINUX)
    assert "give --python /opt/conda/envs/ml/bin/python" in conda
    assert r"--python C:\conda\envs\ml\python.exe" in userpython.active_environment_note(
        {"CONDA_PREFIX": r"C:\conda\envs\ml"}, r"C:\Apps\DDPStudio\env", WINDOWS)
    # DDP Studio's own environment, active (spelt otherwise on Windows): nothing to say.
    assert userpython.active_environment_note({"VIRTUAL_ENV": r"c:\apps\ddpstudio\ENV\\"}, r"C:\Apps\DDPStudio\env",
                                              WINDOWS) is None
    assert userpython.active_environment_note({"VIRTUAL_ENV": sys.prefix}, sys.prefix, LINUX) is None
    assert userpython.active_environment_note({}, sys.prefix, LINUX) is None


def test_the_plan_of_a_script_says_so_when_another_environment_is_active(monkeypatch, tmp_path):
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.plan import ScriptSpec
    from ddpstudio.core.policy import Request, build_plan

    request = Request(world_size=2, script=ScriptSpec(path=str(SCRIPTS / "which_python.py"), style="env"))
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "venv"))
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    said = [r for r in build_plan(request, current(), detect_inventory()).reasons if r.startswith("the environment")]
    assert said == [userpython.active_environment_note({"VIRTUAL_ENV": str(tmp_path / "venv")}, sys.prefix,
                                                       current())]
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)  # DDP Studio's own, activated
    assert not [r for r in build_plan(request, current(), detect_inventory()).reasons
                if r.startswith("the environment")]


def test_a_past_run_in_a_python_of_the_users_exports_without_this_machines_paths(studio_home, capsys):
    from ddpstudio.cli.main import main
    from ddpstudio.core.plan import Plan, ScriptSpec
    from ddpstudio.core.policy import new_run_id, write_plan

    run_id = new_run_id()
    past = Plan(run_id=run_id, run_dir=str(studio_home / "runs" / run_id), world_size=2, backend="gloo",
                device="cpu", store="tcp", init_method="env://", master_port=29500,
                env={userpython.PACKAGE_DIR_ENV: "/opt/ddpstudio/site-packages"},
                script=ScriptSpec(path="/work/train.py", style="env", python="/envs/ml/bin/python"))
    write_plan(past)
    assert main(["export-job", "--to", "torchrun", "--nodes", "2", "--gpus-per-node", "4", run_id]) == 0
    text = capsys.readouterr().out
    header = text.split("set -euo pipefail")[0]
    assert f"dropped {userpython.PACKAGE_DIR_ENV}" in header
    assert "and the packages your script used from /envs/ml/bin/python here" in header
    plan = json.loads(text.split("<<'DDPSTUDIO_PLAN'\n")[1].split("\nDDPSTUDIO_PLAN\n")[0])
    assert plan["env"] == {} and f"export {userpython.PACKAGE_DIR_ENV}" not in text  # the cluster's own paths
    assert plan["script"]["python"] is None and plan["python"] == ""
