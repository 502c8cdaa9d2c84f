"""The join code: everything a second machine needs to join a run, as one copy-pasteable string.

``ddps1.<base64url JSON>.<crc32>``: the host's address(es), the store port,
the run id, the layout (nodes, ranks per node), a random token and the
host's versions. The checksum turns a truncated or mistyped paste into one
clear message instead of a confusing JSON error. The token is a secret: logs
show it only through :func:`mask`.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import zlib
from dataclasses import dataclass, field

PREFIX = "ddps1"
TOKEN_BYTES = 16  # 128 random bits from the OS's CSPRNG
BAD_CODE_HINT = "copy the whole code again from the host (it starts with 'ddps1.')"
# For a text that already starts with the prefix: saying it again reads as if the user had missed it.
PARTIAL_CODE_HINT = "copy the whole code again from the host: part of it is missing or changed"


class JoinCodeError(ValueError):
    """A code that cannot be read; the message says what to do."""


@dataclass(frozen=True)
class JoinCode:
    addresses: tuple[str, ...]  # the host's candidate addresses, best first
    port: int
    run_id: str
    nodes: int
    ranks_per_node: int
    token: str
    versions: dict[str, str] = field(default_factory=dict)  # ddpstudio, python, torch on the host
    script: dict[str, str] = field(default_factory=dict)  # a user's script: nodescript.ScriptRef.to_dict(); {} = recipe
    store_path: str = ""  # the FileStore on a shared folder the nodes meet at (port 0 then); "" = the host's port

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    def masked(self) -> str:
        """The code's content for logs: everything but the token."""
        where = f"store file {self.store_path}" if self.store_path else f"port {self.port}"
        return (f"run {self.run_id} at {', '.join(self.addresses)} {where}, {self.nodes} nodes x "
                f"{self.ranks_per_node} ranks, token {mask(self.token)}")


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def mask(token: str) -> str:
    """The first four characters and a count: enough to tell two codes apart, useless to an intruder."""
    return f"{token[:4]}... ({len(token)} characters)" if len(token) > 4 else "****"


def encode(code: JoinCode) -> str:
    fields = {"a": list(code.addresses), "p": code.port, "r": code.run_id, "n": code.nodes,
              "k": code.ranks_per_node, "t": code.token, "v": code.versions}
    if code.script:
        fields["x"] = code.script  # "s" is the shared folder's store path
    if code.store_path:  # only then: a code without it reads as before
        fields["s"] = code.store_path
    body = json.dumps(fields, separators=(",", ":"), sort_keys=True).encode("utf-8")
    payload = base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")
    return f"{PREFIX}.{payload}.{zlib.crc32(body):08x}"


def decode(text: str) -> JoinCode:
    """The code a user pasted (spaces and line breaks from a chat window are ignored)."""
    cleaned = "".join(str(text).split())
    parts = cleaned.split(".")
    if parts[0] != PREFIX:
        raise JoinCodeError(f"this is not a DDP Studio join code; {BAD_CODE_HINT}")
    if len(parts) != 3:
        raise JoinCodeError(f"the join code is incomplete; {PARTIAL_CODE_HINT}")
    try:
        body = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
    except (binascii.Error, ValueError):
        raise JoinCodeError(f"the join code is damaged; {PARTIAL_CODE_HINT}") from None
    if f"{zlib.crc32(body):08x}" != parts[2].lower():
        raise JoinCodeError(f"the join code is incomplete or mistyped (its checksum does not match); {PARTIAL_CODE_HINT}")
    try:
        raw = json.loads(body)
        code = JoinCode(addresses=tuple(str(a) for a in raw["a"]), port=int(raw["p"]), run_id=str(raw["r"]),
                        nodes=int(raw["n"]), ranks_per_node=int(raw["k"]), token=str(raw["t"]),
                        versions={str(k): str(v) for k, v in dict(raw.get("v", {})).items()},
                        script={str(k): str(v) for k, v in dict(raw.get("x", {})).items()},
                        store_path=str(raw.get("s") or ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise JoinCodeError(f"the join code is damaged; {PARTIAL_CODE_HINT}") from None
    if not code.addresses or not (0 if code.store_path else 1) <= code.port <= 65535 or code.nodes < 2 or code.ranks_per_node < 1 \
            or not code.token:
        raise JoinCodeError(f"the join code holds impossible values; {PARTIAL_CODE_HINT}")
    return code
