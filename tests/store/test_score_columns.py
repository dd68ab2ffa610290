"""The embedded store's score columns never go stale: after every kind of write (and
after a restart from the log or from a snapshot) ``score_columns`` equals the columns
built from ``get_many`` records (the base-class path the Redis backends use)."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.lineage import MemoryRecord, Status
from memlineage.lineage.columns import ScoreColumns
from memlineage.lineage.errors import ValidationError
from memlineage.scoring.batch import column_sources
from memlineage.store import EmbeddedStore, LineageStore
from memlineage.store.base import MAX_BATCH_IDS
from support.memories import NOW

NS = "tenant:cols"


def assert_fresh(store: LineageStore, recorded: list[str], ns: str = NS) -> None:
    """``recorded``: every id the test has stored in ``ns`` (all must be found)."""
    ids = [*recorded[::-1], "missing"]  # any order; unknown ids are omitted
    got = store.score_columns(ns, ids)
    want = LineageStore.score_columns(store, ns, ids)
    assert got.decoded() == want.decoded()
    assert got.ids == ids[:-1]
    # Only stored ids, each once: the unchecked fast path (`Columns.rows_of`).
    fast = store.score_columns(ns, ids[:-1])
    assert fast.decoded() == want.decoded() and fast.ids == ids[:-1]


def test_columns_follow_every_write(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    ids: list[str] = []

    def rec(r: MemoryRecord, *, now: float) -> None:
        store.record(r, now=now)
        ids.append(r.id)

    rec(
        MemoryRecord(
            id="root", namespace=NS, creator_id="user:u", volatility="high", creator_confidence=0.8
        ),
        now=NOW - 500,
    )
    assert_fresh(store, ids)
    rec(
        MemoryRecord(
            id="a", namespace=NS, creator_id="tool:t", dependencies=("root",), type="tool_result"
        ),
        now=NOW - 400,
    )  # adopted by root
    assert_fresh(store, ids)
    rec(
        MemoryRecord(
            id="b",
            namespace=NS,
            creator_id="tool:t",
            dependencies=("a",),
            subject="user:1",
            attribute="city",
            value="Paris",
        ),
        now=NOW - 300,
    )
    rec(
        MemoryRecord(
            id="b2",
            namespace=NS,
            creator_id="agent:p",
            subject="user:1",
            attribute="city",
            value="Paris",
        ),
        now=NOW - 200,
    )  # confirms b
    assert_fresh(store, ids)
    rec(
        MemoryRecord(
            id="b3",
            namespace=NS,
            creator_id="user:v",
            subject="user:1",
            attribute="city",
            value="Rome",
        ),
        now=NOW - 100,
    )  # contradicts b, b2
    assert_fresh(store, ids)
    rec(
        MemoryRecord(
            id="b4",
            namespace=NS,
            creator_id="agent:q",
            subject="user:1",
            attribute="city",
            value="Paris",
        ),
        now=NOW - 90,
    )  # appends to b, b2, b3
    assert_fresh(store, ids)
    rec(
        MemoryRecord(id="c", namespace=NS, creator_id="agent:p", dependencies=("a", "b")),
        now=NOW - 50,
    )
    assert_fresh(store, ids)
    store.record_accesses(NS, {"a": (3, NOW - 10), "c": (1, NOW - 5)})
    store.record_access(NS, ["root"], now=NOW - 4)
    assert_fresh(store, ids)
    store.feedback(NS, ["a", "b"], True, now=NOW)
    store.feedback(NS, ["b"], False, now=NOW)
    assert_fresh(store, ids)
    v = store.get(NS, "c").version
    store.update(
        NS, "c", v, {"creator_confidence": 0.3, "volatility": "medium", "type": "plan"}, now=NOW
    )
    assert_fresh(store, ids)
    rec(MemoryRecord(id="d", namespace=NS, creator_id="reasoning:r"), now=NOW)
    store.add_dependencies(NS, "d", ["c", "root"], expected_version=1, now=NOW)  # adoption
    assert_fresh(store, ids)
    store.revoke(NS, "root", reason="bad", now=NOW)  # cascade to a, b, c, d
    assert_fresh(store, ids)
    store.confirm(NS, "a", now=NOW)
    store.supersede(NS, "b2", "b4", now=NOW)
    store.set_status(NS, "b3", Status.ARCHIVED, reason="sweep", now=NOW)
    store.schedule_review(NS, {"a": NOW + 60}, now=NOW)
    assert_fresh(store, ids)
    before = store.score_columns(NS, ids).decoded()
    store.close()

    replayed = EmbeddedStore(tmp_path)  # from the op log
    assert replayed.score_columns(NS, ids).decoded() == before
    assert_fresh(replayed, ids)
    replayed.compact()
    replayed.close()
    restored = EmbeddedStore(tmp_path)  # from the snapshot
    assert restored.score_columns(NS, ids).decoded() == before
    assert_fresh(restored, ids)
    restored.record(
        MemoryRecord(
            id="e",
            namespace=NS,
            creator_id="user:u",
            subject="user:1",
            attribute="city",
            value="Rome",
            dependencies=("d",),
        ),
        now=NOW,
    )
    ids.append("e")
    restored.feedback(NS, ["e", "d"], False, now=NOW)
    assert_fresh(restored, ids)
    restored.close()


def test_columns_grow_and_bulk_load_keeps_them() -> None:
    store = EmbeddedStore()
    rng = random.Random(3)
    recs = []
    for i in range(300):  # several doublings
        deps = (f"m{rng.randrange(i)}",) if i and rng.random() < 0.3 else ()
        recs.append(
            MemoryRecord(
                id=f"m{i}",
                namespace=NS,
                creator_id=f"agent:{rng.randrange(5)}",
                volatility=rng.choice(["high", "medium", None]),
                dependencies=deps,
                created_at=NOW - rng.uniform(0, 1e5),
                access_count=rng.randrange(4),
                last_access=rng.choice([None, NOW - 10.0]),
                confirmed_by=tuple(
                    sorted(rng.sample(["user:a", "user:b", "tool:c"], rng.randrange(3)))
                ),
                contradicted_by=("tool:z",) if rng.random() < 0.2 else (),
            )
        )
    # The bench/test bulk loader is what this test is about: no public API has its path.
    assert store._bulk_load(NS, recs, review_at=NOW) == 300
    ids = [r.id for r in recs]
    assert_fresh(store, ids)
    assert sum(store.score_columns(NS, ids).derivations) == sum(len(r.dependencies) for r in recs)
    store.record(
        MemoryRecord(id="new", namespace=NS, creator_id="user:a", dependencies=("m0", "m1")),
        now=NOW,
    )
    ids.append("new")
    store.record_accesses(NS, {f"m{i}": (1, NOW) for i in range(0, 300, 7)})
    assert_fresh(store, ids)


def test_unknown_namespace_and_empty_batch() -> None:
    store = EmbeddedStore()
    cols = store.score_columns("nobody", ["x"])
    assert cols.ids == [] and cols.confidence.shape == (0,)
    store.record(MemoryRecord(id="x", namespace=NS, creator_id="user:a"), now=NOW)
    assert store.score_columns(NS, []).ids == []
    assert np.array_equal(store.score_columns(NS, ["x", "x"]).confidence, [1.0])


def _outcome(call: Callable[[], ScoreColumns]) -> object:
    """What a ``score_columns`` call answers: the columns, or the error."""
    try:
        return call().decoded()
    except Exception as exc:
        return type(exc), str(exc)


def test_stored_ids_fast_path_keeps_the_checks() -> None:
    """A batch of stored ids skips id validation; anything else takes the checked path
    with its dedupe and errors, and the answer is the same either way."""
    store = EmbeddedStore()
    for i in range(5):
        store.record(
            MemoryRecord(
                id=f"m{i}", namespace=NS, creator_id=f"agent:{i}", creator_confidence=0.1 * (i + 1)
            ),
            now=NOW,
        )
    # Which path answers is invisible through the API (same answer): only this read of
    # the namespace's columns shows that stored ids do take the fast one.
    assert store._spaces[NS].cols.rows_of(["m3", "m1"]) is not None
    asked = ["m3", "m1"]
    answer = store.score_columns(NS, asked)
    asked.append("m0")  # the caller's list is not the answer's
    assert answer.ids == ["m3", "m1"]
    # A repeat, an unknown id, a value that is not even hashable: the answer (or the
    # error) is the one of the checked path the Redis backends take.
    for odd in (["m3", "m1", "m3"], ["m3", "nope"], [["unhashable"]]):
        assert _outcome(partial(store.score_columns, NS, odd)) == _outcome(
            partial(LineageStore.score_columns, store, NS, odd)
        ), odd
    assert store.score_columns(NS, ["m3", "m1", "m3"]).ids == ["m3", "m1"]
    assert store.score_columns(NS, ["m3", "nope"]).ids == ["m3"]
    assert np.allclose(store.score_columns(NS, ["m3", "m1", "m3"]).confidence, [0.4, 0.2])
    with pytest.raises(ValidationError) as bad:
        store.score_columns(NS, ["m1", "bad id"])
    assert bad.value.field == "ids[1]"
    big = EmbeddedStore()
    for i in range(MAX_BATCH_IDS + 1):
        big.record(MemoryRecord(id=f"b{i}", namespace=NS, creator_id="agent:a"), now=NOW)
    with pytest.raises(ValidationError) as many:  # all stored and distinct: still limited
        big.score_columns(NS, [f"b{i}" for i in range(MAX_BATCH_IDS + 1)])
    assert many.value.code == "TOO_MANY_IDS"
    # A name table much larger than the batch: the distinct sources come from a sort.
    for i in range(5, 400):
        store.record(MemoryRecord(id=f"m{i}", namespace=NS, creator_id=f"agent:{i}"), now=NOW)
    cols = store.score_columns(NS, ["m7", "m2"])
    assert len(cols.sources) > 4 * (2 + 64)
    assert column_sources(cols) == ["agent:2", "agent:7"]
    assert column_sources(store.score_columns(NS, [f"m{i}" for i in range(300)])) == sorted(
        (f"agent:{i}" for i in range(300)), key=lambda s: int(s.split(":")[1])
    )


_SOURCES = ["user:a", "tool:b", "agent:c", "agent:d"]
_op = st.one_of(
    st.tuples(
        st.just("record"),
        st.sampled_from(_SOURCES),
        st.sampled_from(["1", "2"]),
        st.booleans(),
        st.integers(0, 50),
    ),
    st.tuples(
        st.just("status"),
        st.integers(0, 50),
        st.sampled_from([Status.REVOKED, Status.ARCHIVED, Status.PENDING_VERIFICATION]),
    ),
    st.tuples(st.just("access"), st.integers(0, 50), st.integers(1, 3)),
    st.tuples(st.just("feedback"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("update"), st.integers(0, 50), st.floats(0.0, 1.0)),
    st.tuples(st.just("depend"), st.integers(0, 50), st.integers(0, 50)),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_op, min_size=1, max_size=30))
def test_random_write_sequences_keep_the_columns_fresh(ops) -> None:
    store = EmbeddedStore()
    ids: list[str] = []
    for k, op in enumerate(ops):
        now = NOW + k
        try:
            if op[0] == "record":
                _, src, value, claim, dep = op
                deps = (ids[dep % len(ids)],) if ids and dep % 3 == 0 else ()
                mid = f"m{len(ids)}"
                store.record(
                    MemoryRecord(
                        id=mid,
                        namespace=NS,
                        creator_id=src,
                        dependencies=deps,
                        subject="s" if claim else None,
                        attribute="a" if claim else None,
                        value=value,
                    ),
                    now=now,
                )
                ids.append(mid)
            elif not ids:
                continue
            elif op[0] == "status":
                store.set_status(NS, ids[op[1] % len(ids)], op[2], now=now)
            elif op[0] == "access":
                store.record_accesses(NS, {ids[op[1] % len(ids)]: (op[2], now)})
            elif op[0] == "feedback":
                store.feedback(NS, [ids[op[1] % len(ids)]], op[2], now=now)
            elif op[0] == "update":
                mid = ids[op[1] % len(ids)]
                store.update(
                    NS, mid, store.get(NS, mid).version, {"creator_confidence": op[2]}, now=now
                )
            elif op[0] == "depend":
                mid, dep = ids[op[1] % len(ids)], ids[op[2] % len(ids)]
                store.add_dependencies(
                    NS, mid, [dep], expected_version=store.get(NS, mid).version, now=now
                )
        except Exception as exc:  # refused transitions, cycles, duplicate deps
            if exc.__class__.__module__ != "memlineage.lineage.errors":
                raise
        assert_fresh(store, ids)


def test_snapshot_restore_of_varied_rows_equals_the_live_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few thousand varied rows over several snapshot parts, restored through the bulk
    path (``Row.bulk_from_columns``, ``State.link_many``, ``Columns.attach_many``):
    every row, its score columns and a write after the restore equal the live store's."""
    from memlineage.store.embedded import snapshot_parts
    from memlineage.store.embedded.score_mirror import SCORED, Columns

    monkeypatch.setattr(snapshot_parts, "CHUNK_ROWS", 700)  # several parts, links across them
    rng = random.Random(7)
    store = EmbeddedStore(tmp_path)
    ids: list[str] = []
    for i in range(3000):
        deps = tuple(rng.sample(ids[-50:], k=min(len(ids), rng.randint(0, 3)))) if ids else ()
        claim = rng.random() < 0.4
        store.record(
            MemoryRecord(
                id=f"m{i}",
                namespace=NS,
                type=rng.choice(["fact", "tool_result", "plan", "observation"]),
                tags=tuple(rng.sample(["a", "b", "c"], k=rng.randint(0, 2))),
                creator_id=rng.choice(["user:u", "tool:t", "agent:p", "agent:q", "reasoning:r"]),
                creator_confidence=rng.choice([0.3, 0.5, 0.9, 1.0]),
                volatility=rng.choice([None, "high", "medium", "static"]),
                dependencies=deps,
                subject=f"user:{rng.randint(0, 40)}" if claim else None,
                attribute=rng.choice(["city", "job"]) if claim else None,
                value=rng.choice(["x", "y", "z"]) if claim else None,
            ),
            now=NOW - 3000 + i,
        )  # claims: confirmations and contradictions of their group
        ids.append(f"m{i}")
    store.record_accesses(NS, {i: (rng.randint(1, 9), NOW - rng.random()) for i in ids[::7]})
    store.feedback(NS, ids[::11], True, now=NOW)
    store.feedback(NS, ids[::13], False, now=NOW)
    for i in ids[5::97]:
        if store.get(NS, i).status == "active":
            store.revoke(NS, i, reason="bad", now=NOW)  # cascades: history, versions
    for i in ids[3::89]:
        if store.get(NS, i).status == "active":
            store.set_status(NS, i, Status.ARCHIVED, reason="sweep", now=NOW)
    store.schedule_review(NS, {i: NOW + 60 for i in ids[::17]}, now=NOW)
    store.compact()
    live = store.get_many(NS, ids, with_history=True)
    columns = store.score_columns(NS, ids).decoded()
    assert {r.status for r in live.values()} >= {"active", "revoked", "archived"}
    assert any(r.confirmed_by for r in live.values())
    assert any(r.contradicted_by for r in live.values())
    store.close()

    bulk = []
    attach_many = Columns.attach_many

    def counted(self: Columns, rows: list, columns: dict | None = None) -> None:
        # the snapshot's own columns are copied, not read back from every row
        bulk.append((len(rows), sorted(columns or ())))
        attach_many(self, rows, columns)

    monkeypatch.setattr(Columns, "attach_many", counted)
    monkeypatch.setattr(Columns, "attach", lambda self, row: pytest.fail("per-row attach"))
    restored = EmbeddedStore(tmp_path)
    assert bulk == [(len(ids), sorted(SCORED))]
    assert restored.get_many(NS, ids, with_history=True) == live
    assert restored.score_columns(NS, ids).decoded() == columns
    assert_fresh(restored, ids)
    monkeypatch.undo()
    restored.update(NS, "m10", live["m10"].version, {"creator_confidence": 0.1}, now=NOW)
    restored.record_accesses(NS, {"m11": (2, NOW)})
    assert_fresh(restored, ids)
    restored.close()
