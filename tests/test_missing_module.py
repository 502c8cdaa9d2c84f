"""A script that imports a package DDP Studio's Python lacks gets a hint with the line that installs it there.

The ranks run in DDP Studio's environment; an installed app's has no pip, so the line uses the uv the
installer ships (bootstrap/layout.py). The failure's words are CPython's own, from a real process.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

from ddpstudio.core.platform import LINUX, WINDOWS
from ddpstudio.core.hints import hints_for, missing_module_hint
from ddpstudio.core.missing_module import install_command, missing_module


def test_the_missing_module_is_read_from_cpythons_own_words():
    failed = subprocess.run([sys.executable, "-c", "import timm.models"], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=60)
    assert failed.returncode == 1 and "ModuleNotFoundError" in failed.stderr
    assert missing_module(failed.stderr) == "timm"  # the top-level package, what pip installs
    assert missing_module("ZeroDivisionError: division by zero") is None
    hint = missing_module_hint("rank 0 failed first", "ModuleNotFoundError: No module named 'cv2'")
    assert hint.title == "The script needs cv2, which DDP Studio's Python does not have"
    assert f"-m pip install opencv-python\n" in hint.text and sys.prefix in hint.text  # its PyPI name


def test_an_installed_app_installs_with_its_bundled_uv_into_its_own_environment(tmp_path):
    root = tmp_path / "DDPStudio"
    (root / "env" / "Scripts").mkdir(parents=True)
    (root / "uv.exe").write_bytes(b"MZ")
    line = install_command("timm", prefix=str(root / "env"), executable=str(root / "env" / "Scripts" / "pythonw.exe"),
                           platform=WINDOWS)
    assert line == (f"{root / 'uv.exe'} pip install --python {root / 'env' / 'Scripts' / 'python.exe'} timm")
    # Elsewhere (a checkout's venv, a conda environment): that Python's pip; pythonw's console twin on Windows.
    venv = tmp_path / "my venv"
    assert install_command("timm", prefix=str(venv), executable=str(venv / "bin" / "python"), platform=LINUX) == \
        f"{shlex.quote(str(venv / 'bin' / 'python'))} -m pip install timm"
    (root / "uv.exe").unlink()  # no uv beside it: not an installed app
    assert install_command("timm", prefix=str(root / "env"), executable="/x/python", platform=LINUX) == \
        "/x/python -m pip install timm"


def test_a_script_run_in_a_python_of_the_users_installs_there():
    chosen = r"C:\Users\me\envs\ml lab\Scripts\python.exe"
    hint = missing_module_hint("ModuleNotFoundError: No module named 'timm'", chosen=chosen, platform=WINDOWS)
    assert hint.title == "The script needs timm, which the Python you chose does not have"
    assert f'"{chosen}" -m pip install timm' in hint.text.splitlines()
    assert "DDP Studio's Python environment" not in hint.text  # not DDP Studio's: it is not where the ranks run
    assert hints_for("No module named 'timm'", python="/envs/ml/bin/python")[-1].text == missing_module_hint(
        "No module named 'timm'", chosen="/envs/ml/bin/python").text


def test_a_misspelled_import_of_a_known_package_is_not_told_to_install_the_misspelling():
    """``import lightnin`` got "pip install lightnin" (helper trial, 2026-12-07): a name PyPI may give to another
    project. One a letter or two from a package scripts use is said to be a misspelling; a script's own module
    named like a package (dataset.py, transformer.py) and short names are not."""
    words = subprocess.run([sys.executable, "-c", "import lightnin"], capture_output=True, text=True,
                           timeout=60).stderr.strip().splitlines()[-1]
    hint = missing_module_hint(words, chosen="/venv/bin/python")
    assert hint.title == "The script imports lightnin, perhaps a misspelling of lightning"
    assert "correct the import in the script" in hint.text and "pip install" not in hint.text
    assert "Do not install lightnin to fix it" in hint.text
    for own in ("dataset", "transformer", "models", "tim", "mymodule"):
        text = f"ModuleNotFoundError: No module named '{own}'"
        assert "pip install" in missing_module_hint(text, chosen="/venv/bin/python").text, own
