"""`KnownVersions`: the records an adapter last wrote, bounded, least recently used out."""

from __future__ import annotations

from memlineage.integrations.known_versions import KnownVersions
from memlineage.v1 import memlineage_pb2 as pb


def _memory(memory_id: str, version: int = 1) -> pb.Memory:
    return pb.Memory(id=memory_id, version=version)


CLIENT = object()  # the adapter's client (its sidecar and namespace)


def test_the_last_record_written_is_kept_and_a_denied_write_keeps_nothing() -> None:
    known = KnownVersions()
    known.remember(_memory("a", 1), CLIENT)
    known.remember(_memory("a", 2), CLIENT)
    found = known.get("a", CLIENT)
    assert found is not None and found.version == 2
    known.remember(pb.Memory(), CLIENT)  # a refused Record answers no memory
    assert known.get("", CLIENT) is None
    known.forget("a")
    assert known.get("a", CLIENT) is None


def test_an_adapter_given_another_client_starts_over() -> None:
    """Its records are the old client's sidecar's and namespace's: the same id there
    is another record, whatever its version."""
    known = KnownVersions()
    known.remember(_memory("a", 3), CLIENT)
    assert known.get("a", object()) is None
    assert known.get("a", CLIENT) is None  # gone, not kept aside


def test_past_its_bound_the_least_recently_used_is_dropped() -> None:
    known = KnownVersions(keep=2)
    known.remember(_memory("a"), CLIENT)
    known.remember(_memory("b"), CLIENT)
    assert known.get("a", CLIENT) is not None  # used: "b" is now the least recently used
    known.remember(_memory("c"), CLIENT)
    assert [m for m in ("a", "b", "c") if known.get(m, CLIENT) is not None] == ["a", "c"]
