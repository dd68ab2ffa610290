"""Buffered access statistics: summed per memory, flushed in one store call."""

from __future__ import annotations

import logging
import threading

import pytest
from memlineage.engine.access import AccessBuffer
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store import open_store
from support.redis_servers import RedisServer


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
    buf = AccessBuffer(store, max_pending=3)  # reads queued, each of one or more ids
    buf.add("n", ("a", "a"), 1.0)
    buf.add("n", ("a",), 1.5)
    assert store.get("n", "a").access_count == 0
    assert buf.pending() == 2
    buf.add("n", ("a",), 2.0)
    assert store.get("n", "a").access_count == 4
    assert buf.pending() == 0


def test_reads_added_while_flushing_are_all_counted() -> None:
    """Adds take no lock: reads queued from several threads while others flush are
    each written exactly once."""
    store = open_store("embedded", clock=ManualClock(0.0))
    for mid in ("a", "b"):
        store.record(MemoryRecord(id=mid, namespace="n", creator_id="user:u"))
    buf = AccessBuffer(store, max_pending=50)
    per_thread = 5_000

    def reader(k: int) -> None:
        for i in range(per_thread):
            buf.add("n", ("a",) if (i + k) % 2 else ("a", "b"), float(i))

    def flusher(stop: threading.Event) -> None:
        while not stop.is_set():
            buf.flush()

    stop = threading.Event()
    flushers = [threading.Thread(target=flusher, args=(stop,)) for _ in range(2)]
    readers = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for t in flushers + readers:
        t.start()
    for t in readers:
        t.join()
    stop.set()
    for t in flushers:
        t.join()
    buf.flush()
    a, b = store.get("n", "a"), store.get("n", "b")
    assert a.access_count == 4 * per_thread
    assert b.access_count == 4 * per_thread // 2
    assert a.last_access == float(per_thread - 1)


def test_a_damaged_namespace_drops_its_own_counts_only(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """One namespace's damaged record (Redis) fails its own batch, logged with the key;
    the other namespace's accesses are written and the flush (run before any
    namespace's Explain) does not raise, so no caller sees another namespace's key."""
    store = open_store(redis_server.emptied(), clock=ManualClock(1000.0))
    raw = redis_server.client(socket_timeout=5)
    try:
        for ns in ("tenant-a", "tenant-b"):
            store.record(MemoryRecord(id="m", namespace=ns, creator_id="user:u"))
        damaged = "ml:{tenant-b}:m:m"
        raw.hset(damaged, "n", b"lots")  # its access count (field n): not a number
        before = raw.dump(damaged)
        buf = AccessBuffer(store)
        buf.add("tenant-b", ("m",), 1010.0)
        buf.add("tenant-a", ("m",), 1010.0)
        with caplog.at_level(logging.ERROR, logger="memlineage.engine"):
            assert buf.flush() == 1
        assert store.get("tenant-a", "m").access_count == 1
        assert raw.dump(damaged) == before
        [line] = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
        assert "'tenant-b'" in line and damaged in line
        assert buf.pending() == 0 and buf.flush() == 0
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="memlineage.engine"):
            for _ in range(3):  # read again and flushed again: not logged again
                buf.add("tenant-b", ("m",), 1011.0)
                assert buf.flush() == 0
            assert caplog.records == []
            raw.hset(damaged, "n", 1)  # mended
            buf.add("tenant-b", ("m",), 1012.0)
            assert buf.flush() == 1
        said = [r.getMessage() for r in caplog.records]
        assert said == ["access statistics of 'tenant-b' are written again"], said
    finally:
        store.close()
        raw.close()
