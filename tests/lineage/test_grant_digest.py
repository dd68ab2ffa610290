"""A `sha256:` digest has one spelling (prefix and hex lowercased), so a grant and an
act compare it whatever case either was sent in; any other digest is kept as given."""

from __future__ import annotations

import hashlib

from memlineage.lineage.grants import GrantRecord, canonical_digest, validated_grant

HEX = hashlib.sha256(b"DE89370400440532013000").hexdigest()


def test_a_sha256_digest_in_any_case_is_one_digest() -> None:
    for spelled in ("sha256:" + HEX, "SHA256:" + HEX.upper(), "Sha256:" + HEX):
        assert canonical_digest(spelled) == "sha256:" + HEX
    stored = validated_grant(
        GrantRecord("g", "ns", "user:alice", ("pay",), memory_id="m", digest="SHA256:" + HEX),
        now=10.0,
    )
    assert stored.digest == "sha256:" + HEX


def test_what_is_not_sha256_hex_keeps_its_text() -> None:
    for given in ("", "sha-256:" + HEX.upper(), "blake3:ABC", "SHA256:notHexAtAll"):
        kept = canonical_digest(given)
        assert kept.lower() == given.lower() and kept[7:] == given[7:]
