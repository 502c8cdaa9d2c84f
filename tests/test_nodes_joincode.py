"""The join code: a round trip, the token kept out of logs, and garbage refused with one clear message."""

from __future__ import annotations

import pytest

from ddpstudio.core.nodes import joincode
from ddpstudio.core.nodes.joincode import JoinCode, JoinCodeError


def sample(**changes) -> JoinCode:
    values = dict(addresses=("192.168.1.20", "10.0.0.5"), port=29511, run_id="20261124-040000-ab12", nodes=3,
                  ranks_per_node=2, token=joincode.new_token(),
                  versions={"ddpstudio": "0.1.0", "python": "3.11.9", "torch": "2.14.1"})
    values.update(changes)
    return JoinCode(**values)


def test_a_code_round_trips_and_is_one_copy_pasteable_word():
    code = sample()
    text = joincode.encode(code)
    assert text.startswith("ddps1.") and all(c.isalnum() or c in "._-" for c in text)
    assert joincode.decode(text) == code
    assert code.world_size == 6
    # pasted from a chat window: wrapped over lines, with spaces around
    assert joincode.decode("  " + text[:40] + "\n" + text[40:] + " \n") == code


def test_tokens_are_random_and_long():
    tokens = {joincode.new_token() for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) >= 22 for t in tokens)


def test_the_token_is_masked_for_logs():
    code = sample()
    masked = code.masked()
    assert code.token not in masked and code.token[:4] in masked
    assert "192.168.1.20" in masked and "29511" in masked and code.run_id in masked
    assert joincode.mask("abc") == "****"


@pytest.mark.parametrize("garbage, says", [
    ("", "not a DDP Studio join code"),
    ("hello", "not a DDP Studio join code"),
    ("ddps2.abc.00000000", "not a DDP Studio join code"),
    ("ddps1.!!!!.00000000", "damaged"),
    ("ddps1.e30.00000000", "checksum"),  # '{}' with a wrong checksum
])
def test_garbage_gets_one_clear_message(garbage, says):
    with pytest.raises(JoinCodeError) as caught:
        joincode.decode(garbage)
    assert says in str(caught.value) and "copy the whole code again" in str(caught.value)


def test_a_truncated_or_mistyped_code_fails_its_checksum():
    text = joincode.encode(sample())
    head, payload, crc = text.split(".")
    with pytest.raises(JoinCodeError, match="checksum"):
        joincode.decode(f"{head}.{payload[:-3]}.{crc}")
    flipped = payload[:10] + ("A" if payload[10] != "A" else "B") + payload[11:]
    with pytest.raises(JoinCodeError, match="checksum"):
        joincode.decode(f"{head}.{flipped}.{crc}")


def test_well_formed_json_with_wrong_fields_is_damaged_not_a_crash():
    import base64
    import json
    import zlib

    for body in (b'{"a":[]}', b"[1,2]", json.dumps({"a": ["h"], "p": 0, "r": "x", "n": 2, "k": 1, "t": "tok"}).encode()):
        text = f"ddps1.{base64.urlsafe_b64encode(body).decode().rstrip('=')}.{zlib.crc32(body):08x}"
        with pytest.raises(JoinCodeError, match="damaged|impossible"):
            joincode.decode(text)


def test_join_reads_the_code_from_stdin_and_refuses_garbage_there_too(studio_home):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "ddpstudio", "join", "-"], input="ddps1.garbage.00\n",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("ddpstudio: error: the join code is incomplete or mistyped") and \
        line.endswith("copy the whole code again from the host: part of it is missing or changed"), line
    assert "starts with 'ddps1.'" not in line  # issue 24: the pasted text already does


def test_a_shared_folder_code_carries_the_store_path_and_old_codes_still_read():
    shared = sample(port=0, store_path="\\\\server\\share\\pg")
    assert joincode.decode(joincode.encode(shared)) == shared
    assert "store file \\\\server\\share\\pg" in shared.masked() and "port" not in shared.masked()
    # A code without a store path is the same string as before the field existed (key "s" left out) ...
    old = sample()
    assert '"s"' not in joincode.base64.urlsafe_b64decode(joincode.encode(old).split(".")[1] + "==").decode()
    assert joincode.decode(joincode.encode(old)).store_path == ""
    # ... and port 0 is impossible without one.
    with pytest.raises(JoinCodeError, match="impossible values"):
        joincode.decode(joincode.encode(sample(port=0)))
