"""A script whose own code names its FileStore (``init_method="file://..."``): its leftovers are ours to clean.

The DDP tutorial's Windows form and PyTorch's old DDP example make their store at a fixed path. A run that
is killed or stopped leaves the file behind (torch deletes it only when every rank exits cleanly, pytorch
#13865), and the next run on it hangs or fails (#55967). The rank helper tells the launcher the path when a
rank meets there (``rank_meeting``'s ``store_file``); the run's registry record keeps it; ``ddpstudio clean``
lists it, the script's next run removes it first (its launcher was killed: nothing else could), a run's launcher
removes it once every rank is gone, and a file that was there before a run DDP Studio did not see is said at
once. Real Gloo ranks, a real SIGKILL, a real stop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ddpstudio.core import protocol
from ddpstudio.core.cleanup import registry
from ddpstudio.core.cleanup.hygiene import scan
from tests.studio import SCRIPTS, ddpstudio, events, final, of_type, sigint_at
from tests.test_clean_e2e import CliRun, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.posix_only("kills ranks with SIGKILL")]
SCRIPT = SCRIPTS / "own_filestore.py"


def test_a_scripts_own_store_is_cleaned_before_the_script_runs_again_and_said_when_found_left_over(
        studio_home, tmp_path, monkeypatch):
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the ranks' tempfile.gettempdir(): where the script makes its store
    store = temp / "ddp_example"

    # 1. A run of the script, SIGKILLed mid-training (its launcher too, so nothing ends it): its store stays,
    #    recorded with the run.
    killed = CliRun(tmp_path, "--script", str(SCRIPT), "--world-size", "2", "--", "forever")
    killed.wait_training()
    record = wait_for(lambda: (r := registry.read_record(registry.record_path(killed.record.run_id))).script_stores
                      and r, 30, "the script's store in the run's record")
    assert (record.script, record.script_stores, record.store_path) == (str(SCRIPT), [str(store)], None)
    killed.sigkill()
    assert store.is_file(), "a SIGKILLed run leaves its FileStore file behind"
    leftover = store.read_bytes()
    [stale] = [s for s in scan().stale_stores if s.path == str(store)]
    assert stale.reason == f"left by run {killed.record.run_id}, which failed"  # the CLI saw its launcher die

    # 2. The script again: the leftover is removed before its ranks start, and it trains.
    again = ddpstudio("run", "--json", "--script", str(SCRIPT), "--world-size", "2", "--", "3")
    assert again.returncode == 0, again.stderr[-3000:] + again.stdout[-3000:]
    assert (f"ddpstudio: removed the leftover store file {store}, which this script names (left by run "
            f"{killed.record.run_id}, which failed)") in again.stderr
    evs = events(again.stdout)
    assert final(evs).get("state") == protocol.FINISHED
    assert not [w for w in of_type(evs, protocol.WARNING) if "existed before" in w.get("message")]
    assert sorted(e.get("step") for e in of_type(evs, protocol.GLOBAL_STEP)) == [1, 2, 3]
    assert not store.exists()

    # 3. A leftover of a run DDP Studio never saw (a terminal's), under another script that names the same
    #    file: said at once; after the stop the launcher removes it (every rank is gone).
    store.write_bytes(leftover)
    os.utime(store, (time.time() - 180, time.time() - 180))
    copy = tmp_path / "train.py"
    copy.write_text(SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    log = tmp_path / "copy.log"
    with open(log, "w") as out:
        cli = subprocess.Popen([sys.executable, "-m", "ddpstudio", "run", "--json", "--script", str(copy),
                                "--world-size", "2", "--", "forever"], stdout=out, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, **sigint_at(signal.SIG_DFL))
    try:
        said = (f"the store file {store}, which your script names, existed before this run started (last written 3 "
                "min before)")
        wait_for(lambda: said in log.read_text(encoding="utf-8"), 60, "the warning about the leftover")
        cli.send_signal(signal.SIGINT)
        assert cli.wait(60) == 3, log.read_text(encoding="utf-8")[-3000:]
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait(30)
    evs = events(log.read_text(encoding="utf-8"))
    [warning] = [w for w in of_type(evs, protocol.WARNING) if said in w.get("message")]
    assert "pytorch #55967" in warning.get("message") and "Clean up" in warning.get("message")
    assert final(evs).get("state") == protocol.STOPPED
    assert not store.exists() and not os.listdir(temp)
