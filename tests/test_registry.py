"""The run registry: atomic records, end states, and unreadable records reported, never raised."""

from __future__ import annotations

import json

import pytest

from ddpstudio.core import paths

from ddpstudio.core.cleanup import registry
from ddpstudio.core.cleanup.registry import RankRecord


def _start(run_id: str = "r1", **kw) -> registry.RunRecord:
    args = dict(run_dir=f"/runs/{run_id}", launcher_pid=10, launcher_create_time=100.5,
                ranks=[RankRecord(0, 11, 101.0), RankRecord(1, 12, None)], store_path="/tmp/pg",
                store_is_fixed=True, port=None, started=99.0)
    args.update(kw)
    return registry.record_start(run_id, **args)


def test_record_round_trips_and_leaves_no_temp_file():
    written = _start()
    [record], corrupt = registry.load_records()
    assert corrupt == []
    assert record == written
    assert (record.run_id, record.state, record.ended, record.ranks[1].create_time) == ("r1", "running", None, None)
    assert [p.name for p in paths.registry_dir().iterdir()] == ["r1.json"]
    assert json.loads(registry.record_path("r1").read_text())["version"] == registry.SCHEMA_VERSION


def test_record_start_again_replaces_the_record_as_ranks_are_added():
    _start(ranks=[])
    _start(ranks=[RankRecord(0, 11, 101.0)])
    [record], _ = registry.load_records()
    assert record.ranks == [RankRecord(0, 11, 101.0)]


def test_record_end_sets_the_state_and_time():
    _start()
    ended = registry.record_end("r1", "failed", note="why")
    [record], _ = registry.load_records()
    assert record == ended
    assert (record.state, record.note) == ("failed", "why") and record.ended is not None
    assert record.ended_state


def test_record_end_of_an_unknown_or_unreadable_run_is_a_no_op():
    assert registry.record_end("nope", "finished") is None
    paths.registry_dir().mkdir(parents=True)
    registry.record_path("bad").write_text("{", encoding="utf-8")
    assert registry.record_end("bad", "finished") is None
    assert registry.record_path("bad").read_text() == "{"
    with pytest.raises(ValueError):
        registry.record_end("r1", "running")


def test_records_come_back_oldest_first():
    _start("b", started=200.0)
    _start("a", started=300.0)
    _start("c", started=100.0)
    records, _ = registry.load_records()
    assert [r.run_id for r in records] == ["c", "b", "a"]


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "not valid JSON"),
    (b'{"run_id": "x", "run_dir": "/r", "launcher_pid": 1, "launch', "half-written"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"run_id": "x", "run_dir": "/r"}', "missing field 'launcher_pid'"),
    (b'{"run_id": "x", "run_dir": "/r", "launcher_pid": "abc", "started": 1}', "bad field value"),
    (b'{"run_id": "x", "run_dir": "/r", "launcher_pid": 1, "started": 1, "state": "zombie"}', "unknown state"),
    (b'{"run_id": "y", "run_dir": "/r", "launcher_pid": 1, "started": 1}', "names run 'y'"),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
])
def test_corrupt_records_are_reported_with_why_and_skipped(content, reason):
    _start("good")
    paths.registry_dir().joinpath("x.json").write_bytes(content)
    records, corrupt = registry.load_records()
    assert [r.run_id for r in records] == ["good"]
    [bad] = corrupt
    assert bad.path.endswith("x.json") and bad.run_id == "x"
    assert reason in bad.reason


def test_no_registry_folder_means_no_records():
    assert registry.load_records() == ([], [])


def test_temp_files_of_a_write_in_progress_are_not_records():
    _start()
    paths.registry_dir().joinpath("r2.json.123.tmp").write_text("{half", encoding="utf-8")
    records, corrupt = registry.load_records()
    assert [r.run_id for r in records] == ["r1"] and corrupt == []
