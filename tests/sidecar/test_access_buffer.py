"""Buffered access statistics: summed per memory, flushed in one store call."""

from __future__ import annotations

from memlineage.engine.access import AccessBuffer
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store import open_store


def test_reads_are_summed_and_flushed_together() -> None:
    clock = ManualClock(1000.0)
    store = open_store("embedded", clock=clock)
    for mid in ("a", "b"):
        store.record(MemoryRecord(id=mid, namespace="n", creator_id="user:u"))
    buf = AccessBuffer(store)
    buf.add("n", ["a", "b"], 1010.0)
    buf.add("n", ["a"], 1005.0)
    buf.add("n", ["ghost"], 1020.0)
    assert store.get("n", "a").access_count == 0  # nothing written yet
    assert buf.flush() == 2
    a, b = store.get("n", "a"), store.get("n", "b")
    assert (a.access_count, a.last_access) == (2, 1010.0)
    assert (b.access_count, b.last_access) == (1, 1010.0)
    assert buf.flush() == 0


def test_a_full_buffer_flushes_itself() -> None:
    store = open_store("embedded", clock=ManualClock(0.0))
    store.record(MemoryRecord(id="a", namespace="n", creator_id="user:u"))
    buf = AccessBuffer(store, max_pending=3)
    buf.add("n", ["a", "a"], 1.0)
    assert store.get("n", "a").access_count == 0
    buf.add("n", ["a"], 2.0)
    assert store.get("n", "a").access_count == 3
