"""Store paths torch's FileStore can open on Windows (ASCII only), through the platform seam."""

import os

import pytest

from ddpstudio.core.plan import RecipeSpec
from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.policy import PolicyError, Request, build_plan
from ddpstudio.core.rendezvous import asciipath
from ddpstudio.core.rendezvous.asciipath import fallback_root, safe_store_folder, safe_store_path, store_folders


@pytest.fixture
def profile(tmp_path):
    """A user folder with a non-ASCII name, and an ASCII alias standing in for its 8.3 short name."""
    folder = tmp_path / "Jürgen" / "stores"
    folder.mkdir(parents=True)
    alias = tmp_path / "JRGEN~1"
    alias.symlink_to(tmp_path / "Jürgen", target_is_directory=True)
    return folder, str(alias / "stores")


def test_ascii_folders_and_linux_paths_are_used_as_they_are(tmp_path, profile):
    folder, _ = profile
    assert safe_store_folder(tmp_path, WINDOWS).path == str(tmp_path)
    # POSIX open takes the path's bytes: no replacement on Linux, and no Win32 call.
    assert safe_store_folder(folder, LINUX, short_name=lambda p: pytest.fail("no short name on Linux")).path == str(folder)


def test_a_non_ascii_folder_is_replaced_by_its_short_name(profile):
    folder, short = profile
    safe = safe_store_folder(folder, WINDOWS, short_name=lambda p: short if p == str(folder) else None)
    assert safe.path == short and safe.path.isascii()
    assert os.path.samefile(safe.path, folder)  # the same folder, spelt in ASCII
    assert "short name" in safe.note and str(folder) in safe.note


def test_without_a_short_name_the_per_user_ascii_folder_is_used(tmp_path, profile):
    folder, _ = profile
    fallback = tmp_path / "Public" / "DDPStudio" / "stores" / "u1"
    safe = safe_store_folder(folder, WINDOWS, short_name=lambda p: None, fallback=str(fallback))
    assert safe.path == str(fallback) and fallback.is_dir()
    assert "no short name" in safe.note


def test_the_fallback_folder_is_ascii_for_every_user_name():
    env = {"PUBLIC": r"C:\Users\Public", "USERNAME": "alice"}
    assert fallback_root(env) == r"C:\Users\Public\DDPStudio\stores\alice"
    jurgen = fallback_root({"PUBLIC": r"C:\Users\Public", "USERNAME": "Jürgen"})
    assert jurgen.isascii() and jurgen.startswith(r"C:\Users\Public\DDPStudio\stores\u")
    assert jurgen != fallback_root({"PUBLIC": r"C:\Users\Public", "USERNAME": "Jörg"})  # one folder per user
    assert fallback_root({"SystemDrive": "D:", "USERNAME": "bob"}) == r"D:\Users\Public\DDPStudio\stores\bob"


def test_a_fixed_store_path_under_a_non_ascii_folder(profile):
    folder, short = profile
    safe = safe_store_path(str(folder / "pg"), WINDOWS, short_name=lambda p: short)
    assert safe.path == short + "\\pg" and safe.path.isascii()
    with pytest.raises(ValueError, match="has no short name.*narrow C runtime open.*D:\\\\pg"):
        safe_store_path(str(folder / "pg"), WINDOWS, short_name=lambda p: None)
    with pytest.raises(ValueError, match="non-ASCII characters in its file name"):
        safe_store_path(str(folder.parent / "prüfung"), WINDOWS, short_name=lambda p: short)
    assert safe_store_path("D:\\pg", WINDOWS).path == "D:\\pg"


def test_the_plan_refuses_a_store_path_torch_cannot_open(tmp_path, monkeypatch):
    monkeypatch.setattr(asciipath, "short_path_name", lambda p: None)
    target = tmp_path / "Müller" / "pg"
    target.parent.mkdir()
    with pytest.raises(PolicyError) as info:
        build_plan(Request(store_path=str(target), recipe=RecipeSpec()), WINDOWS, _cpu())
    assert info.value.field == "store_path"


def test_a_non_ascii_data_folder_gets_an_ascii_store_and_cleanup_looks_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # on Linux the Windows-style folders below are relative names
    home = "C:\\Users\\Jürgen\\AppData\\Local\\DDPStudio"
    monkeypatch.setenv("DDPSTUDIO_HOME", home)
    monkeypatch.setenv("PUBLIC", "C:\\Users\\Public")
    monkeypatch.setenv("USERNAME", "Jürgen")
    monkeypatch.setattr(asciipath, "short_path_name", lambda p: None)
    plan = build_plan(Request(recipe=RecipeSpec()), WINDOWS, _cpu())
    assert plan.store_path.isascii() and plan.store_path.startswith(fallback_root())
    assert plan.store_path.startswith("C:\\Users\\Public\\DDPStudio\\stores\\u")
    stores = home + "\\stores"
    assert store_folders(stores, WINDOWS) == [stores, fallback_root()]
    assert store_folders(stores, LINUX) == [stores]


def _cpu():
    from ddpstudio.core.gpu import detect_inventory

    return detect_inventory()


@pytest.mark.slow
def test_a_real_run_under_a_non_ascii_profile_keeps_store_logs_and_checkpoint(studio_home, monkeypatch):
    """Linux opens non-ASCII paths as bytes: the store, the logs and torch.save/torch.load all work there.

    One rank: every path here is opened by rank 0 alone (a one-rank run still meets on its FileStore,
    rank/recipe.py ``dist.init_process_group``), so a peer would only add a second torch start per run."""
    from ddpstudio.core import protocol
    from ddpstudio.core.launch.rundir import RunDir
    from tests.studio import TINY, ddpstudio, events, final, of_type

    home = studio_home / "Jürgen Müller" / "DDPStudio"
    monkeypatch.setenv("DDPSTUDIO_HOME", str(home))
    checkpoints = home / "Prüfpunkte"
    for resume in ([], ["--resume"]):
        res = ddpstudio("run", "--json", "--max-steps", str(2 + 2 * bool(resume)), "--checkpoint-dir",
                        str(checkpoints), *resume, "--world-size", "1", *TINY)
        assert res.returncode == 0, res.stderr + res.stdout[-3000:]
        evs = events(res.stdout)
        started = of_type(evs, protocol.RUN_STARTED)[0]
        assert started.get("store_path").startswith(str(home))  # kept as it is: not Windows
        assert final(evs).get("state") == "finished"
        assert RunDir.at(started.get("run_dir")).stdout(0).exists()
        assert (checkpoints / "checkpoint.pt").is_file()
    assert [e.get("step") for e in of_type(evs, protocol.GLOBAL_STEP)] == [3, 4]  # resumed after step 2
