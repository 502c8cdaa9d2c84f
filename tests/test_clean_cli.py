"""``ddpstudio clean`` and ``ddpstudio doctor`` on real leftovers (real processes and files, no torch ranks)."""

from __future__ import annotations

import io
import json
import os

import pytest

from ddpstudio.cli.clean import print_findings
from ddpstudio.core.cleanup import hygiene
from ddpstudio.core import paths
from tests.studio import ddpstudio
from tests.test_hygiene import alive, procs, record, stale_file  # noqa: F401  (procs is a fixture)

HOLD = "f = open({path!r}); print('ready', flush=True); import time; time.sleep(300)"


def clean_json(*args: str) -> tuple[int, dict]:
    res = ddpstudio("clean", "--json", *args, timeout=60)
    assert res.returncode in (0, 1), res.stderr
    return res.returncode, json.loads(res.stdout)


def test_foreign_holder_survives_clean_yes_and_is_stopped_with_include_foreign(procs, tmp_path):  # noqa: F811
    store = stale_file(tmp_path / "pg")
    record("dead", store=store)
    holder = procs(HOLD.format(path=store), session=False, wait_ready=True)

    code, out = clean_json("--yes")
    [listed] = out["findings"]["lock_holders"]
    assert (listed["pid"], listed["ours"], listed["path"]) == (holder.pid, False, store)
    assert out["findings"]["foreign"] == [listed]
    assert code == 1 and out["report"]["killed"] == [] and out["report"]["deleted"] == []
    assert alive(holder) and os.path.exists(store)

    code, out = clean_json("--yes", "--include-foreign")
    assert code == 0, out["report"]
    assert [p["pid"] for p in out["report"]["killed"]] == [holder.pid]
    assert out["report"]["deleted"] == [store]
    assert not alive(holder) and not os.path.exists(store)


def test_human_output_marks_not_ours_and_the_summary_says_what_was_left(procs, tmp_path):  # noqa: F811
    store = stale_file(tmp_path / "pg")
    record("dead", store=store)
    holder = procs(HOLD.format(path=store), session=False, wait_ready=True)
    res = ddpstudio("clean", "--yes", timeout=60)
    assert res.returncode == 1
    assert f"pid {holder.pid}" in res.stdout and "[NOT OURS]" in res.stdout
    assert "--include-foreign" in res.stdout and "Left 2 items" in res.stdout
    assert alive(holder)


def test_a_reused_pid_survives_clean_yes(procs, tmp_path):  # noqa: F811
    stranger = procs()
    from ddpstudio.core.process.proctable import create_time

    ct = create_time(stranger.pid)
    record("old", ranks=[(stranger.pid, ct - 500.0)], store=stale_file(tmp_path / "pg"))
    code, out = clean_json("--yes")
    assert code == 0 and out["findings"]["orphans"] == [] and out["report"]["killed"] == []
    assert alive(stranger)


def test_without_a_terminal_clean_asks_for_yes_and_does_nothing(procs, tmp_path):  # noqa: F811
    rank = procs()
    store = stale_file(tmp_path / "pg")
    record("dead", ranks=[rank], store=store)
    res = ddpstudio("clean", timeout=60)
    assert res.returncode == 1 and "add --yes" in res.stderr
    assert f"pid {rank.pid}" in res.stdout and store in res.stdout
    assert alive(rank) and os.path.exists(store)


def test_dry_run_prints_what_would_be_done(procs, tmp_path):  # noqa: F811
    rank = procs()
    store = stale_file(tmp_path / "pg")
    record("dead", ranks=[rank], store=store)
    res = ddpstudio("clean", "--dry-run", timeout=60)
    assert res.returncode == 0
    assert f"Would stop 1 process (pid {rank.pid}). Would delete 1 stale store file: {store}." in res.stdout
    assert alive(rank) and os.path.exists(store)


@pytest.mark.slow
def test_corrupt_record_is_reported_and_skipped_by_clean_and_doctor(tmp_path):
    store = stale_file(tmp_path / "pg")
    record("ok", store=store, state="failed")
    paths.registry_dir().joinpath("torn.json").write_text('{"run_id": "to', encoding="utf-8")

    doctor = ddpstudio("doctor", "--json", timeout=120)
    assert doctor.returncode == 0, doctor.stderr
    leftovers = json.loads(doctor.stdout)["leftovers"]
    assert [c["path"] for c in leftovers["corrupt_records"]] == [str(paths.registry_dir() / "torn.json")]
    assert [s["path"] for s in leftovers["stale_stores"]] == [store]

    code, out = clean_json("--yes")
    assert code == 0, out
    assert out["report"]["deleted"] == [store]
    assert [os.path.basename(a) for a, _ in out["report"]["moved"]] == ["torn.json"]
    assert ddpstudio("clean", "--yes", timeout=60).stdout.startswith("leftovers: none")


def test_print_findings_lists_every_kind(procs, tmp_path):  # noqa: F811
    rank = procs()
    store = stale_file(tmp_path / "pg")
    record("dead", ranks=[rank], store=store)
    paths.registry_dir().joinpath("bad.json").write_text("[]", encoding="utf-8")
    out = io.StringIO()
    print_findings(hygiene.scan().to_dict(), out)
    text = out.getvalue()
    assert "stale store files" in text and store in text and "which was killed" in text
    assert f"pid {rank.pid}" in text and "rank 0 of run dead" in text
    assert "bad.json: not a JSON object" in text
    empty = io.StringIO()
    print_findings({"empty": True}, empty)
    assert empty.getvalue().startswith("leftovers: none")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _clean_in_process(monkeypatch, answers: str, *flags: str) -> int:
    from ddpstudio.cli.main import _parser

    monkeypatch.setattr("sys.stdin", _Terminal(answers))
    args = _parser().parse_args(["clean", *flags])
    return args.func(args)


def test_on_a_terminal_clean_asks_first(procs, tmp_path, monkeypatch, capsys):  # noqa: F811
    rank = procs()
    store = stale_file(tmp_path / "pg")
    record("dead", ranks=[rank], store=store)
    assert _clean_in_process(monkeypatch, "n\n") == 1
    assert alive(rank) and os.path.exists(store)
    assert "Clean up the leftovers listed above? [y/N]" in capsys.readouterr().err
    assert _clean_in_process(monkeypatch, "y\n") == 0
    assert not alive(rank) and not os.path.exists(store)
    assert "Stopped 1 process" in capsys.readouterr().out


def test_on_a_terminal_foreign_processes_need_a_second_yes(procs, tmp_path, monkeypatch, capsys):  # noqa: F811
    store = stale_file(tmp_path / "pg")
    record("dead", store=store)
    holder = procs(HOLD.format(path=store), session=False, wait_ready=True)
    assert _clean_in_process(monkeypatch, "y\nn\n", "--include-foreign") == 1
    assert alive(holder) and "marked NOT OURS?" in capsys.readouterr().err
    assert _clean_in_process(monkeypatch, "y\ny\n", "--include-foreign") == 0
    assert not alive(holder) and not os.path.exists(store)
