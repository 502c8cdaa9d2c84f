"""The bootstrap runs before torch, Qt or any dependency exists: it may use the stdlib only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

import ddpstudio.bootstrap
from tests.test_layers import imported_modules

PACKAGE = Path(ddpstudio.bootstrap.__file__).parent
# exitcodes is standard library only (checked below): the bootstrap names a crashed child with it.
ALLOWED_OWN = ("ddpstudio.bootstrap", "ddpstudio.core.platform", "ddpstudio.core.process.exitcodes")


def test_only_stdlib_and_the_platform_seam():
    for path in sorted(PACKAGE.glob("*.py")):
        for name in imported_modules(path):
            top = name.split(".")[0]
            ok = top in sys.stdlib_module_names or top == "__future__" or name.startswith(ALLOWED_OWN)
            assert ok, f"{path.name} imports {name}"


def test_importing_everything_pulls_in_no_dependency():
    code = (
        "import sys, pkgutil, importlib, ddpstudio.bootstrap as b\n"
        "for m in pkgutil.iter_modules(b.__path__):\n"
        "    if m.name not in ('__main__', 'window'): importlib.import_module('ddpstudio.bootstrap.' + m.name)\n"
        "bad = sorted({n.split('.')[0] for n in sys.modules} & {'torch','PySide6','pyqtgraph','pynvml','psutil','platformdirs','numpy'})\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"
    assert psutil.Process().children(recursive=True) == []


def test_the_core_modules_the_bootstrap_uses_are_stdlib_only_too():
    from ddpstudio.core.process import exitcodes

    for name in imported_modules(Path(exitcodes.__file__)):
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names or top == "__future__" or name == "ddpstudio.core.platform", name
