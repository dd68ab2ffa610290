"""`proposals(ns, ids)`: the proposals of a batch in one read, the same as one
`proposal` call per id, on every backend; on Redis one HMGET however large the batch
(the sweep asked once per memory: a round trip each), a damaged value refused as the
single read refuses it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from memlineage.lifecycle.sweep import sweep
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.errors import StoreCorruptError
from memlineage.scoring.config import ScoringConfig
from memlineage.store import LineageStore, open_store
from support.memories import NOW, T0, memory
from support.proposals import OWNER, pending_for_an_hour, stale_at_now
from support.redis_servers import RedisServer

NS, OTHER = "batch", "batch-other"


def _saved(store: LineageStore) -> list[str]:
    ids = [f"m{i}" for i in range(40)]
    for i, mid in enumerate(ids):
        if i % 3 == 0:
            store.save_proposal(pending_for_an_hour(NS, mid, NOW), "proposed", now=NOW)
        elif i % 3 == 1:
            store.save_proposal(stale_at_now(NS, mid, objected=True), now=NOW)
    store.save_proposal(pending_for_an_hour(OTHER, "m2", NOW), now=NOW)  # not NS's
    return ids


def test_the_batch_read_is_the_single_reads(store: LineageStore) -> None:
    ids = _saved(store)
    asked = [*ids, "m0", "never-proposed"]  # a repeat and an id without one
    one_by_one = {i: p for i in asked if (p := store.proposal(NS, i)) is not None}
    batch = store.proposals(NS, asked)
    assert batch == one_by_one
    assert list(batch) == [i for i in ids if int(i[1:]) % 3 != 2]  # in the order asked
    assert "m2" not in batch  # OTHER's proposal of the same id is OTHER's
    assert store.proposals(NS, []) == {}


def _calls(raw: object, command: str) -> int:
    stats = raw.info("commandstats")  # type: ignore[attr-defined]
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def test_on_redis_a_batch_is_one_hmget_and_a_damaged_value_is_named(
    redis_server: RedisServer,
) -> None:
    store = open_store(redis_server.emptied())
    raw = redis_server.client(socket_timeout=5)
    try:
        ids = _saved(store)
        raw.config_resetstat()
        assert len(store.proposals(NS, ids)) == 27
        assert (_calls(raw, "hmget"), _calls(raw, "hget")) == (1, 0)

        key = f"ml:{{{NS}}}:pp"
        raw.hset(key, "m3", b'["m3", "batch"')  # not JSON
        before = raw.dump(key)
        with pytest.raises(StoreCorruptError) as err:
            store.proposals(NS, ids)
        assert err.value.path == key and "'m3'" in err.value.problem
        with pytest.raises(StoreCorruptError) as single:
            store.proposal(NS, "m3")
        assert (single.value.path, single.value.problem) == (err.value.path, err.value.problem)
        assert raw.dump(key) == before  # a read changes nothing
    finally:
        store.close()
        raw.close()


def test_a_sweep_reads_its_batch_s_proposals_in_one_round_trip(
    redis_server: RedisServer,
) -> None:
    """30 memories with a pending proposal each: the pass that hears them (past their
    deadline) asks Redis once for all the proposals, not once per memory."""
    clock = ManualClock(T0)
    store = open_store(redis_server.emptied(), clock=clock)
    raw = redis_server.client(socket_timeout=5)
    cfg = ScoringConfig(objection_window=3600.0)
    try:
        for i in range(30):
            store.record(memory(f"n{i}", ns=NS, creator_id=OWNER, creator_kind="agent"))
        clock.advance(30 * 86400.0)  # their values fall below archive_below
        assert len(sweep(store, cfg, clock()).proposed) == 30
        clock.advance(2 * 3600.0)  # past every proposal's deadline
        raw.config_resetstat()
        heard = sweep(store, cfg, clock())
        assert len(heard.transitions) == 30  # all archived, none objected to
        # the batch read, once (a read per memory was an HGET each, and no HMGET; the
        # scripts that archive them HGET the records, so HGETs are not counted here)
        assert _calls(raw, "hmget") == 1
    finally:
        store.close()
        raw.close()


def test_a_save_replacing_a_proposal_is_written_only_over_that_one(store: LineageStore) -> None:
    """`replacing`: two owners objecting at once were both answered while one
    objection was lost (an outside audit). The second save, made over the proposal
    the first replaced, writes nothing: neither the proposal nor its event."""
    store.record(memory("m", ns=NS))
    first = pending_for_an_hour(NS, "m", NOW)
    store.save_proposal(first, "proposed", now=NOW)
    a = stale_at_now(NS, "m", objected=True)
    b = replace(a, objections=(replace(a.objections[0], by="agent:other"),))
    _, cursor = store.events(NS)
    assert store.save_proposal(a, "objected", now=NOW, replacing=first)
    assert not store.save_proposal(b, "objected", now=NOW, replacing=first)
    assert store.proposal(NS, "m") == a
    events, _ = store.events(NS, after=cursor)
    assert [(e.type, e.memory_id) for e in events] == [("objected", "m")]
    assert not store.save_proposal(b, now=NOW, replacing=first)  # with no event alike
    assert store.save_proposal(b, now=NOW, replacing=a)  # over the one there: written
    assert store.proposal(NS, "m") == b
    fresh = pending_for_an_hour(NS, "none", NOW)  # none there: nothing to replace
    assert not store.save_proposal(fresh, now=NOW, replacing=first)
    assert store.proposal(NS, "none") is None


def test_on_redis_a_save_replacing_a_value_spelled_otherwise_is_written(
    redis_server: RedisServer,
) -> None:
    """The Redis script compared the stored bytes with `replacing.to_json()`: a
    proposal another writer stored with whole-number times (`1767225600`, not
    `1767225600.0`) decoded equal but never compared equal, so every objection to it
    was refused as "kept changing" for good (a review). The bytes compared are the
    ones read now, when they decode to `replacing`."""
    store = open_store(redis_server.emptied())
    raw = redis_server.client(socket_timeout=5)
    try:
        store.record(memory("m", ns=NS))
        first = replace(pending_for_an_hour(NS, "m", NOW), proposed_at=float(int(NOW)))
        store.save_proposal(first, now=NOW)
        key = f"ml:{{{NS}}}:pp"
        spelled = first.to_json().replace(repr(float(int(NOW))), str(int(NOW)))
        assert spelled != first.to_json()
        raw.hset(key, "m", spelled)
        assert store.proposal(NS, "m") == first
        later = stale_at_now(NS, "m", objected=True)
        assert store.save_proposal(later, "objected", now=NOW, replacing=first)
        assert store.proposal(NS, "m") == later
        assert not store.save_proposal(first, now=NOW, replacing=first)  # moved on: refused
    finally:
        store.close()
        raw.close()
