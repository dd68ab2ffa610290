"""A cascade on Redis is walked in chunks (one script per chunk): a walk stopped
half-way (its sidecar killed, Redis gone) is noted with the change that started it
(``ml:{ns}:pc``, in the same script) and finished later, by a retry of the change or
by the store's maintenance (`finish_cascades`), on a real redis-server and a real
cluster. Before, the memories below the stop stayed active for good: a retried
revoke answered FAILED_PRECONDITION and nothing marked the rest (an outside audit)."""

from __future__ import annotations

import pytest
import redis
from memlineage.lineage import MemoryRecord, Status, TransitionError
from memlineage.lineage.errors import StoreCorruptError
from memlineage.store import LineageStore
from memlineage.store.redis_keys import RedisKeys
from redis.cluster import RedisCluster
from support.memories import NOW

NS = "cascade:resume"
KEYS = RedisKeys()


@pytest.fixture(params=["redis", "cluster"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def chain(store: LineageStore, n: int) -> list[str]:
    ids = [f"c{i}" for i in range(n)]
    for i, mid in enumerate(ids):
        store.record(
            MemoryRecord(
                id=mid,
                namespace=NS,
                creator_id="tool:t",
                dependencies=(ids[i - 1],) if i else (),
            )
        )
    return ids


def raw(store: LineageStore) -> redis.Redis | RedisCluster:
    return store.client  # type: ignore[attr-defined, no-any-return]  # the store's own client


def statuses(store: LineageStore, ids: list[str]) -> list[str]:
    got = store.get_many(NS, ids)
    return [got[i].status for i in ids]


@pytest.mark.parametrize("finish", ["maintenance", "retry"])
def test_a_cascade_stopped_half_way_is_finished(store: LineageStore, finish: str) -> None:
    ids = chain(store, 30)
    # the walk will stop at c12: a key of another type there fails its chunk whole
    history = KEYS.history(NS, "c12")
    raw(store).delete(history)
    raw(store).set(history, "not a list")
    with pytest.raises(StoreCorruptError):
        store.revoke(NS, "c0", reason="bad source", now=NOW)
    assert statuses(store, ids)[:12] == ["revoked"] + ["pending_verification"] * 11
    assert set(statuses(store, ids)[12:]) == {"active"}  # stopped half-way
    note = raw(store).hget(KEYS.pending_cascades(NS), "c0")
    assert note is not None and note.split("\x1f")[:2] == ["c0", "revoked"]
    raw(store).delete(history)  # mended
    if finish == "maintenance":
        assert store.finish_cascades(min_age=3600, now=NOW + 60) == 0  # not old enough yet
        assert store.finish_cascades(min_age=30, now=NOW + 60) == 1
    else:  # the caller retries the revoke: refused as before, the walk finished first
        with pytest.raises(TransitionError):
            store.revoke(NS, "c0", reason="bad source", now=NOW + 1)
    assert statuses(store, ids) == ["revoked"] + ["pending_verification"] * 29
    assert raw(store).hlen(KEYS.pending_cascades(NS)) == 0
    entry = store.get_many(NS, ["c29"], with_history=True)["c29"].status_history[-1]
    assert (entry.to_status, entry.root_id) == ("pending_verification", "c0")
    assert store.finish_cascades() == 0  # nothing left


def test_a_finished_cascade_leaves_no_note(store: LineageStore) -> None:
    ids = chain(store, 5)
    store.record(MemoryRecord(id="newer", namespace=NS, creator_id="tool:t"))
    store.set_status(NS, "c0", Status.SUPERSEDED, reason="newer", successor="newer", now=NOW)
    assert statuses(store, ids) == ["superseded"] + ["pending_verification"] * 4
    assert raw(store).exists(KEYS.pending_cascades(NS)) == 0


def test_a_cascade_stopped_in_a_namespace_missing_from_the_registry_is_finished(
    store: LineageStore,
) -> None:
    """Records applied while the registry's master did not answer leave their
    namespace out of it (the registry is written after the record's script, in
    another slot). A revoke registers its namespace before its walk's note, so
    maintenance, which walks the registry, finishes a walk stopped there (before:
    never, and the memories below the stop stayed active for good; an outside audit
    on a cluster whose registry master was killed)."""
    ids = chain(store, 6)
    raw(store).srem(KEYS.namespaces(), NS)  # as if each Record's registry write failed
    assert NS not in store.namespaces()
    history = KEYS.history(NS, "c3")
    raw(store).delete(history)
    raw(store).set(history, "not a list")  # the walk stops at c3
    with pytest.raises(StoreCorruptError):
        store.revoke(NS, "c0", reason="bad source", now=NOW)
    raw(store).delete(history)
    assert NS in store.namespaces()
    assert store.finish_cascades(min_age=30, now=NOW + 60) == 1
    assert statuses(store, ids) == ["revoked"] + ["pending_verification"] * 5
