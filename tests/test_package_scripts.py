"""A script that is a module of its package runs as one: ``python -m mypkg.train``, as ``torchrun -m`` runs it.

Run as a file, ``from .model import Net`` stopped every rank at once ("attempted relative import with no
known parent package"), and so did ``from mypkg.model import Net`` where mypkg is not installed. The plan
now reads the imports (core/scriptmodule.py), runs such a script with ``-m`` and the folder above its
package first on PYTHONPATH, and says so; ``--module NAME`` names one as torchrun's ``-m`` does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.scriptargs import parse_script
from ddpstudio.core.scriptmodule import module_entry, module_file, module_root
from tests.studio import ddpstudio, events, final, of_type

TRAIN = '''\
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from {model_import} import Net


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(rank)
    for step in range(6):
        x = torch.randn(8, 4)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"rank {{rank}} step {{step}} loss {{loss.item():.4f}} package {{__package__}}", flush=True)
    if rank == 0:
        with open("trained.txt", "w") as f:  # the working folder stays the one the run was started from
            f.write(__file__)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''
MODEL = "import torch\n\n\nclass Net(torch.nn.Linear):\n    def __init__(self):\n        super().__init__(4, 1)\n"


def package(root: Path, folders: str, *, init: bool = True, model_import: str = ".model",
            script: str = "train.py") -> Path:
    """``root/folders/`` holding model.py and a training script that imports Net as ``model_import``; every
    folder holds an ``__init__.py`` when ``init``. Returns the script."""
    here = root.joinpath(*folders.split("/"))
    here.mkdir(parents=True)
    if init:
        for depth in range(1, len(folders.split("/")) + 1):
            root.joinpath(*folders.split("/")[:depth], "__init__.py").touch()
    (here / "model.py").write_text(MODEL)
    (here / script).write_text(TRAIN.format(model_import=model_import))
    return here / script


def entry(script: Path):
    return module_entry(str(script), parse_script(script.read_text()))


# -- what the reader decides ----------------------------------------------------------------------------
def test_a_relative_import_runs_the_script_as_a_module_of_its_package(tmp_path):
    script = package(tmp_path, "mypkg")
    found = entry(script)
    assert (found.name, found.root) == ("mypkg.train", str(tmp_path))
    assert found.why == ("the script imports relatively (from .model import Net, line 5), which works only inside "
                         f"its package mypkg: it runs as python -m mypkg.train, found from {tmp_path} (as torchrun "
                         "-m runs it from there)")
    assert module_root(str(script), found.name) == str(tmp_path)
    nested = entry(package(tmp_path / "repo", "src_pkg/sub"))
    assert (nested.name, nested.root) == ("src_pkg.sub.train", str(tmp_path / "repo"))


def test_a_folder_without_init_is_a_namespace_package_as_deep_as_the_relative_import_needs(tmp_path):
    one = entry(package(tmp_path / "a", "tools", init=False))
    assert (one.name, one.root) == ("tools.train", str(tmp_path / "a"))
    # from ..model: two packages up, though only the inner folder holds __init__.py
    script = package(tmp_path / "b", "outer/inner", init=False, model_import="..model")
    (script.parent / "__init__.py").touch()
    (script.parent.parent / "model.py").write_text(MODEL)
    two = entry(script)
    assert (two.name, two.root) == ("outer.inner.train", str(tmp_path / "b"))
    assert "(from ..model import Net, line 5)" in two.why


def test_an_import_of_its_own_package_runs_it_as_a_module_and_other_imports_do_not(tmp_path):
    own = entry(package(tmp_path / "a", "mypkg", model_import="mypkg.model"))
    assert own.name == "mypkg.train"
    assert own.why.startswith("the script imports its own package (from mypkg.model import Net, line 5), which "
                              "Python finds only from the folder above mypkg: it runs as python -m mypkg.train")
    # Installed (importable without the working folder): it runs as a file, as it did before.
    installed = package(tmp_path / "i", "mypkg", model_import="mypkg.model")
    assert module_entry(str(installed), parse_script(installed.read_text()), importable=lambda name: True) is None
    # A module beside it (the script's folder is on the path as a file): a file, as before.
    assert entry(package(tmp_path / "b", "mypkg", model_import="model")) is None
    # The same script outside any package, and one that imports nothing of its own.
    assert entry(package(tmp_path / "c", "scripts", init=False, model_import="model")) is None
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nprint(torch.__version__)\n")
    assert entry(plain) is None
    assert module_entry(str(plain), None) is None  # unreadable or not Python: a file, as before


def test_installed_means_found_without_the_working_folder(tmp_path, monkeypatch):
    from ddpstudio.core.scriptmodule import installed

    assert installed("json") and installed("ddpstudio") and installed("torch")  # stdlib, editable, site-packages
    assert not installed("no_such_package_here")
    package(tmp_path, "only_here")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as python -m puts the working folder first
    assert not installed("only_here")  # a script run as a file would not find it there
    monkeypatch.chdir(tmp_path / "only_here")  # the same entry, no longer the working folder: as PYTHONPATH
    assert installed("only_here")


def test_a_package_main_runs_by_the_package_name_and_unnamable_folders_stay_files(tmp_path):
    main = entry(package(tmp_path / "a", "mypkg", script="__main__.py"))
    assert (main.name, main.root) == ("mypkg", str(tmp_path / "a"))
    assert module_root(str(tmp_path / "a" / "mypkg" / "__main__.py"), "mypkg") == str(tmp_path / "a")
    for folders in ("my-project", "class"):  # not a Python name; a keyword
        assert entry(package(tmp_path / "b", folders)) is None, folders
    from ddpstudio.core.hints import hints_for

    [hint] = hints_for("ImportError: attempted relative import with no known parent package")
    assert hint.key == "package_import" and "my_project" in hint.text


def test_module_names_are_found_from_the_working_folder_as_python_m_finds_them(tmp_path):
    script = package(tmp_path, "mypkg")
    package(tmp_path, "runner", script="__main__.py")
    assert module_file("mypkg.train", str(tmp_path)) == str(script)
    assert module_file("runner", str(tmp_path)) == str(tmp_path / "runner" / "__main__.py")
    with pytest.raises(ValueError) as missing:
        module_file("mypkg.nope", str(tmp_path))
    nope, nope_main = os.path.join("mypkg", "nope.py"), os.path.join("mypkg", "nope", "__main__.py")
    assert str(missing.value) == (
        f"--module mypkg.nope: there is no {nope} or {nope_main} in {tmp_path}, the working folder, where python "
        "-m looks first: run from the folder above your package, or give the file with --script")
    with pytest.raises(ValueError, match="--module 'my-pkg.train' is not a module name"):
        module_file("my-pkg.train", str(tmp_path))


# -- the plan and the ranks' command ----------------------------------------------------------------------
def plan_of(script: Path, module: str | None = None):
    from ddpstudio.core.gpu import detect_inventory
    from ddpstudio.core.plan import ScriptSpec
    from ddpstudio.core.platform import LINUX
    from ddpstudio.core.policy import Request, build_plan

    spec = ScriptSpec(path=str(script), style="env", module=module)
    return build_plan(Request(script=spec, world_size=2), LINUX, detect_inventory(), interfaces={})


def test_the_plan_says_it_and_each_rank_runs_python_m_with_the_package_root_on_its_path(studio_home, tmp_path):
    from ddpstudio.core.launch.commands import rank_command, rank_env, rank_helper_dir

    script = package(tmp_path, "mypkg")
    plan = plan_of(script)
    assert plan.script.module == "mypkg.train" and entry(script).why in plan.reasons
    assert rank_command(plan, 1, "plan.json")[1:] == ["-u", "-m", "mypkg.train"]
    env = rank_env(plan, 1, "events", base={"PYTHONPATH": "/theirs"})
    assert env["PYTHONPATH"].split(os.pathsep) == [rank_helper_dir(), str(tmp_path), "/theirs"]
    # Named by the user and the same as read: the reader's reason; named otherwise: the user's choice.
    assert entry(script).why in plan_of(script, "mypkg.train").reasons
    (tmp_path / "tools").mkdir()
    other = tmp_path / "tools" / "go.py"
    other.write_text("print('hi')\n")
    chosen = plan_of(other, "tools.go")
    assert f"the script runs as python -m tools.go, found from {tmp_path}: chosen by you (--module)" in chosen.reasons
    assert plan_of(other).script.module is None


def test_dash_dash_module_is_found_from_the_working_folder_and_a_cluster_job_runs_it_with_torchrun_m(
        studio_home, tmp_path):
    package(tmp_path, "mypkg", model_import="mypkg.model")
    res = ddpstudio("export-job", "--to", "torchrun", "--device", "cpu", "run", "--module", "mypkg.train",
                    "--world-size", "2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    last = res.stdout.rstrip().splitlines()[-1]
    assert last.startswith("exec torchrun ") and last.endswith(" -m mypkg.train")
    assert (f"#   - your package mypkg in the working folder of every node, as in {tmp_path} here (torchrun -m "
            "finds it from there)") in res.stdout
    assert "(env style) with its arguments, run as python -m mypkg.train\n" in res.stdout
    refused = ddpstudio("run", "--module", "mypkg.nope", cwd=tmp_path)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith(f"ddpstudio: error: --module mypkg.nope: there is no {os.path.join('mypkg', 'nope.py')}")
    assert not (studio_home / "runs").exists()  # refused before any run was made


# -- real runs -------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_package_script_with_relative_imports_trains_from_another_folder(studio_home, tmp_path):
    script = package(tmp_path / "proj", "mypkg")
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    res = ddpstudio("run", "--json", "--script", str(script), "--world-size", "2", cwd=elsewhere)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    evs = events(res.stdout)
    assert entry(script).why in of_type(evs, protocol.RUN_STARTED)[0].get("reasons")
    commands = {e.rank: e.get("command") for e in of_type(evs, protocol.RANK_STARTED)}
    assert [c[1:4] for c in commands.values()] == [["-u", "-m", "mypkg.train"]] * 2
    lines = [e.get("line") for e in of_type(evs, protocol.LOG)]
    for rank in (0, 1):
        assert any(line.startswith(f"rank {rank} step 5 loss ") and line.endswith(" package mypkg")
                   for line in lines), lines
    assert final(evs).get("state") == protocol.FINISHED
    assert (elsewhere / "trained.txt").read_text() == str(script)  # its __file__, in the folder it ran from
