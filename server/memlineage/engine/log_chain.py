"""What the decision log's writer and its verifier share: the genesis hash, the
line's hash function (SHA-256, or HMAC-SHA-256 with a key) and the shapes of a hash."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

GENESIS = "0" * 64
HASH_RE = re.compile(rb',"hash":"([0-9a-f]{64})"\}\Z')
HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def digester(key: bytes | None) -> Callable[[bytes], str]:
    """bytes -> hex digest: SHA-256, or HMAC-SHA-256 (RFC 2104) with `key`. The HMAC's
    padded-key states are hashed once and copied per line: half the cost of
    `hmac.digest`, which sets up OpenSSL's HMAC context on every call."""
    sha = hashlib.sha256
    if key is None:
        return lambda data: sha(data).hexdigest()
    if len(key) > 64:  # SHA-256's block
        key = sha(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha(bytes(k ^ 0x36 for k in key))
    outer = sha(bytes(k ^ 0x5C for k in key))

    def digest(data: bytes) -> str:
        i = inner.copy()
        i.update(data)
        o = outer.copy()
        o.update(i.digest())
        return o.hexdigest()

    return digest


def key_bytes(key: str | bytes | None) -> bytes | None:
    if key is None or key == "" or key == b"":
        return None
    return key.encode("utf-8") if isinstance(key, str) else key
