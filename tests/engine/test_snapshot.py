"""Store records become policy facts field by field (positional construction guard)."""

from __future__ import annotations

from memlineage.engine import snapshot
from memlineage.engine.snapshot import snapshot_of, to_facts
from memlineage.lineage.model import MemoryRecord


def test_to_facts_maps_every_field_by_name() -> None:
    rec = MemoryRecord(
        id="m",
        namespace="ns",
        type="preference",
        tags=("a", "b"),
        subject="user:1",
        attribute="seat",
        value="aisle",
        volatility="low",
        creator_kind="tool",
        creator_id="tool:x",
        creator_confidence=0.7,
        created_at=12.5,
        context_id="ctx",
        dependencies=("d1", "d2"),
        status="pending_verification",
        successor=None,
        version=3,
        last_access=20.0,
        access_count=4,
        confirmed_by=("tool:y",),
        contradicted_by=("tool:z", "agent:q"),
    )
    f = to_facts(rec, now=99.0)
    assert (f.id, f.namespace, f.type, f.tags) == ("m", "ns", "preference", ("a", "b"))
    assert (f.subject, f.attribute, f.value, f.volatility) == ("user:1", "seat", "aisle", "low")
    assert (f.creator.kind, f.creator.id, f.confidence) == ("tool", "tool:x", 0.7)
    assert (f.created_at, f.context_id, f.dependencies) == (12.5, "ctx", ("d1", "d2"))
    assert (f.status, f.state, f.version, f.successor) == (
        "pending_verification",
        "pending_verification",
        3,
        "",  # a string never set is "" to policies (before: None, so `== ""` never held)
    )
    assert (f.access_count, f.last_access) == (4, 20.0)
    assert (f.confirmations, f.contradictions, f.known) == (1, 2, True)
    assert (f.reliability, f.value_score) == (1.0, 1.0)  # set per request from the scores
    assert (
        to_facts(MemoryRecord(id="n", namespace="ns", creator_id="u"), now=99.0).created_at == 99.0
    )
    bare = to_facts(MemoryRecord(id="n", namespace="ns", creator_id="u"), now=99.0)
    assert (bare.subject, bare.value, bare.volatility, bare.context_id) == ("", "", "", "")


class SharingStore:
    """A store handing out its records as shared objects (as the embedded one does)."""

    shares_records = True


def test_a_namespace_loading_many_records_evicts_only_its_own_facts() -> None:
    # An outside audit: the facts were cleared whole when full, by whichever namespace
    # filled them, so that every other namespace built its facts again.
    store = SharingStore()
    mine = {"note": MemoryRecord(id="note", namespace="tenant-b", created_at=1.0)}
    _snap, first = snapshot_of(mine, store, "tenant-b", now=5.0)  # type: ignore[arg-type]
    many = {
        f"m{i}": MemoryRecord(id=f"m{i}", namespace="tenant-a", created_at=1.0)
        for i in range(100_000)  # the whole, in distinct records
    }
    snapshot_of(many, store, "tenant-a", now=5.0)  # type: ignore[arg-type]
    _snap, again = snapshot_of(mine, store, "tenant-b", now=5.0)  # type: ignore[arg-type]
    assert again["note"] is first["note"]  # tenant-b's facts are still kept
    snapshot._FACTS.drop("tenant-a")  # not left to the other tests
