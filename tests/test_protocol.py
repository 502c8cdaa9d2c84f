import json

from ddpstudio.core import protocol
from ddpstudio.core.protocol import EventParser, make_event


def test_event_round_trips_through_the_parser():
    ev = make_event(protocol.STEP, rank=1, step=3, loss=0.5, samples_per_s=12.0)
    [back] = EventParser().feed(ev.to_line())
    assert (back.type, back.v, back.rank, back.get("step"), back.get("loss")) == ("step", 1, 1, 3, 0.5)
    assert back.t == ev.t


def test_every_event_has_type_version_and_time():
    raw = json.loads(make_event(protocol.RUN_FINISHED, state="finished").to_line())
    assert raw["type"] == "run_finished" and raw["v"] == protocol.SCHEMA_VERSION and isinstance(raw["t"], float)
    assert "rank" not in raw


def test_unknown_types_and_garbage_are_skipped():
    parser = EventParser()
    assert parser.feed('{"type":"telemetry_v9","v":1,"t":1}') == []
    assert parser.skipped_unknown == 1
    for line in ["", "Epoch 1 loss 0.3", "{not json", "[1,2]", '{"v":1}', '{"type":"step","v":"1"}',
                 b'\xff\xfe', '{"type":"step","v":true}']:
        assert parser.feed(line) == []


def test_newer_version_is_reported_once_and_still_parsed():
    parser = EventParser()
    first = parser.feed('{"type":"step","v":7,"t":1,"rank":0,"step":1,"loss":2.0,"new_field":1}')
    assert [e.type for e in first] == ["warning", "step"]
    assert "version 7" in first[0].get("message")
    assert first[1].get("loss") == 2.0
    again = parser.feed('{"type":"step","v":7,"t":2,"rank":0,"step":2,"loss":1.0}')
    assert [e.type for e in again] == ["step"]
