"""The Wine tier: DDP Studio run by Windows CPython 3.11 and PyTorch 2.14.1's Windows build, under Wine.

Each test is a real Windows process tree: the command line, the launcher, the ranks, Job Objects,
drive-letter paths. The runtime is built by ``scripts/wine-env.sh`` (cached in ~/.cache/ddpstudio-wine;
the first session downloads and builds it, about 2.5 minutes). What Wine 8 lacks and how the runtime
works around it: ``scripts/wine_env.py`` WORKAROUNDS and docs/windows.md.
"""

from __future__ import annotations

import pytest

from tests.wine import WindowsBox, build_runtime, missing, report

pytestmark = [
    pytest.mark.wine,
    pytest.mark.slow,
    pytest.mark.posix_only("runs the Windows build under Wine on Linux"),
    pytest.mark.timeout(400),  # under faulthandler_timeout (420 s), which ends the whole run
    pytest.mark.skipif(missing() is not None, reason=missing() or ""),
]


@pytest.fixture(scope="module")
def box(tmp_path_factory) -> WindowsBox:
    base = tmp_path_factory.mktemp("wine-tier")
    windows = WindowsBox(base, build_runtime(base / "runtime"))
    try:
        windows.boot()
        yield windows
    finally:
        windows.shut_down()


@pytest.fixture
def home(box, request) -> str:
    """This test's DDP Studio home on drive C:; afterwards no Windows process of the runtime is left."""
    path = "C:\\studio\\" + request.node.name[:40]
    yield path
    box.assert_none_left()


def test_doctor_says_windows_and_survives_processes_it_cannot_read(box, home):
    proc = box.ddpstudio("doctor", "--json", home=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = report(proc.stdout)
    assert facts["platform"] == "Windows"
    assert facts["python"].startswith("3.11.")
    assert facts["inventory"]["torch_version"] == "2.14.1+cpu"
    assert facts["choice"]["backend"] == "gloo"
    assert facts["choice"]["store"] == "file" and "libuv" in facts["choice"]["store_reason"]
    assert "built without libuv" in facts["libuv"]
    assert facts["network"]["loopback_interface"]
    # The process scan ran over Wine's own processes, whose executable psutil cannot read here.
    assert facts["leftovers"]["orphans"] == [] and facts["leftovers"]["stale_stores"] == []
