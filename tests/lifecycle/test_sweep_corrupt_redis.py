"""The governance sweep on a real redis-server meeting values it cannot read (a damaged
proposal ``ml:{ns}:pp``, a damaged record hash ``ml:{ns}:m:<id>``, written with
redis-py): the pass goes on. The memory is skipped (never moved, its damaged value
untouched), logged once with the key, listed in ``SweepReport.unreadable`` and looked
at again after ``near_interval``; the damaged namespace's other memories and the
healthy namespace make their due transitions. Before, the pass raised
``StoreCorruptError`` on every run and nothing was swept."""

from __future__ import annotations

import logging
from functools import partial

import pytest
from memlineage.lifecycle.sweep import sweep
from memlineage.lineage.clock import ManualClock
from memlineage.scoring.config import ScoringConfig
from memlineage.store import open_store
from support.memories import T0, memory
from support.redis_servers import RedisServer

DAY = 86400.0
HOUR = 3600.0
CFG = ScoringConfig(objection_window=HOUR)
DAMAGED, HEALTHY = "sweep-damaged", "sweep-healthy"
agent = partial(memory, creator_id="agent:planner", creator_kind="agent", type="note")


def test_a_corrupt_proposal_or_record_skips_only_its_memory(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(T0)
    store = open_store(redis_server.emptied(), clock=clock)
    raw = redis_server.client(socket_timeout=5)
    try:
        for ns in (DAMAGED, HEALTHY):
            store.record(agent("owned", ns=ns))
            store.record(agent("other", ns=ns))
        clock.advance(30 * DAY)  # their values drop below archive_below
        first = sweep(store, CFG, clock())
        assert sorted((t.memory_id, t.to_status) for t in first.proposed) == [
            ("other", "archived"),
            ("other", "archived"),
            ("owned", "archived"),
            ("owned", "archived"),
        ]
        assert first.transitions == [] and first.unreadable == []

        pp = f"ml:{{{DAMAGED}}}:pp"
        raw.hset(pp, "owned", b'["owned",')  # the proposal: not JSON
        store.record(agent("broken", ns=DAMAGED))
        record = f"ml:{{{DAMAGED}}}:m:broken"
        raw.hset(record, "f", b"high")  # the record's confidence: not a number
        damaged = (raw.hget(pp, "owned"), raw.hget(record, "f"))
        clock.advance(2 * HOUR)  # past the proposals' deadline and broken's first review

        with caplog.at_level(logging.ERROR, logger="memlineage.sweep"):
            second = sweep(store, CFG, clock())
        assert sorted((t.memory_id, t.to_status) for t in second.transitions) == [
            ("other", "archived"),  # the damaged namespace's other memory
            ("other", "archived"),
            ("owned", "archived"),  # the healthy namespace's due transition
        ]
        assert store.get(HEALTHY, "owned").status == "archived"
        assert store.get(DAMAGED, "other").status == "archived"
        assert store.get(DAMAGED, "owned").status == "active"  # not moved: not heard
        assert len(second.unreadable) == 2, second.unreadable
        by_key = {m.split(" ")[1]: m for m in second.unreadable}
        assert set(by_key) == {pp, record}, second.unreadable
        assert "field 'owned'" in by_key[pp] and "is not valid JSON" in by_key[pp]
        assert "field 'f' (creator_confidence)" in by_key[record]
        logged = [r.getMessage() for r in caplog.records]
        assert len(logged) == 2 and all(DAMAGED in m for m in logged), logged
        assert any(pp in m for m in logged) and any(record in m for m in logged), logged
        # untouched (only the review schedule moved: the record's field r)
        assert (raw.hget(pp, "owned"), raw.hget(record, "f")) == damaged

        # looked at again after near_interval (not due for ever), still reported
        assert sweep(store, CFG, clock()).unreadable == []
        clock.advance(CFG.near_interval)
        assert len(sweep(store, CFG, clock()).unreadable) == 2

        store.drop_proposal(DAMAGED, "owned")  # mended (the proposal dropped)
        raw.delete(record)
        clock.advance(CFG.near_interval)
        third = sweep(store, CFG, clock())
        assert third.unreadable == []
        assert [(t.memory_id, t.to_status) for t in third.proposed] == [("owned", "archived")]
    finally:
        raw.close()
        store.close()
