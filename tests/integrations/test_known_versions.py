"""`KnownVersions`: the records an adapter last wrote, bounded, least recently used out."""

from __future__ import annotations

from memlineage.integrations.known_versions import KnownVersions
from memlineage.v1 import memlineage_pb2 as pb


def _memory(memory_id: str, version: int = 1) -> pb.Memory:
    return pb.Memory(id=memory_id, version=version)


def test_the_last_record_written_is_kept_and_a_denied_write_keeps_nothing() -> None:
    known = KnownVersions()
    known.remember(_memory("a", 1))
    known.remember(_memory("a", 2))
    found = known.get("a")
    assert found is not None and found.version == 2
    known.remember(pb.Memory())  # a refused Record answers no memory
    assert known.get("") is None
    known.forget("a")
    assert known.get("a") is None


def test_past_its_bound_the_least_recently_used_is_dropped() -> None:
    known = KnownVersions(keep=2)
    known.remember(_memory("a"))
    known.remember(_memory("b"))
    assert known.get("a") is not None  # used: "b" is now the least recently used
    known.remember(_memory("c"))
    assert [m for m in ("a", "b", "c") if known.get(m) is not None] == ["a", "c"]
