"""Property tests: random operation sequences give identical results (records, cascade
``affected`` order, lineage event logs, claim groups with their confirmations and
contradictions, source statistics, review schedule) on embedded and Redis, and always
leave derivations the exact inverse of dependencies."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage.lineage import LineageError, ManualClock, MemoryRecord, Status
from memlineage.store import EmbeddedStore, LineageStore, open_store
from support.lineage_events import normalise
from support.memories import NOW
from support.redis_servers import RedisServer

_namespaces = itertools.count()

idx = st.integers(min_value=0, max_value=11)
op = st.one_of(
    st.tuples(
        st.just("record"),
        st.lists(idx, max_size=3),
        st.booleans(),
        st.booleans(),
        st.integers(0, 2),
        st.sampled_from([None, "x", "y"]),
    ),
    st.tuples(st.just("revoke"), idx),
    st.tuples(st.just("supersede"), idx, idx),
    st.tuples(st.just("archive"), idx),
    st.tuples(st.just("confirm"), idx),
    st.tuples(st.just("update"), idx, st.booleans()),
    st.tuples(st.just("access"), st.lists(idx, max_size=4)),
    st.tuples(st.just("link"), idx, idx),
    st.tuples(st.just("feedback"), st.lists(idx, max_size=3), st.booleans()),
    st.tuples(st.just("schedule"), st.lists(idx, max_size=3), st.integers(-5, 5)),
    st.tuples(st.just("unschedule"), st.lists(idx, max_size=3)),
)
SOURCES = ["agent:0", "agent:1", "agent:2"]


def apply(store: LineageStore, ns: str, ops: list[tuple], ids: list[str]) -> list[object]:
    """Run ``ops``; return each outcome (a record/count or the error's class and code)."""
    outcomes: list[object] = []
    for n, (kind, *a) in enumerate(ops):
        now = NOW + n
        pick = (lambda i: ids[i % len(ids)]) if ids else (lambda i: f"none{i}")
        try:
            if kind == "record":
                memory_id = f"m{n}"
                deps = tuple(dict.fromkeys(pick(i) for i in a[0]))
                rec = store.record(
                    MemoryRecord(
                        id=memory_id,
                        namespace=ns,
                        creator_id=SOURCES[a[3]],
                        dependencies=deps,
                        subject="user:1" if a[1] else None,
                        attribute="city" if a[1] else None,
                        value=a[4],
                        status="pending_verification" if a[2] else "active",
                    ),
                    now=now,
                )
                ids.append(memory_id)
                out: object = rec
            elif kind == "revoke":
                out = store.revoke(ns, pick(a[0]), reason="r", now=now)
            elif kind == "supersede":
                out = store.supersede(ns, pick(a[0]), pick(a[1]), now=now)
            elif kind == "archive":
                out = store.set_status(ns, pick(a[0]), Status.ARCHIVED, now=now)
            elif kind == "confirm":
                out = store.confirm(ns, pick(a[0]), now=now)
            elif kind == "update":
                current = store.get(ns, pick(a[0]))
                version = current.version - 1 if a[1] else current.version
                out = store.update(ns, current.id, version, {"value": str(n)})
            elif kind == "link":
                current = store.get(ns, pick(a[0]))
                out = store.add_dependencies(
                    ns, current.id, [pick(a[1])], expected_version=current.version, now=now
                )
            elif kind == "feedback":
                out = store.feedback(ns, [pick(i) for i in a[0]], a[1], now=now)
            elif kind == "schedule":
                out = store.schedule_review(ns, {pick(i): now + a[1] for i in a[0]}, now=now)
            elif kind == "unschedule":
                out = store.unschedule_review(ns, [pick(i) for i in a[0]])
            else:
                out = store.record_access(ns, [pick(i) for i in a[0]], now=now)
        except LineageError as exc:
            out = (type(exc).__name__, exc.code, exc.field)
        outcomes.append(out)
    return outcomes


def check_links(store: LineageStore, ns: str, ids: list[str]) -> dict[str, MemoryRecord]:
    records = store.get_many(ns, ids)
    for rec in records.values():
        for dep in rec.dependencies:
            assert records[dep].derivations.count(rec.id) == 1
        for child in rec.derivations:
            assert rec.id in records[child].dependencies
    return records


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, max_size=25))
def test_embedded_and_redis_agree(redis_server: RedisServer, ops: list[tuple]) -> None:
    ns = f"prop{next(_namespaces)}"
    clock = ManualClock(NOW)
    embedded = EmbeddedStore(clock=clock)
    remote = open_store(redis_server.url, clock=clock)
    try:
        ids_e: list[str] = []
        ids_r: list[str] = []
        assert apply(embedded, ns, ops, ids_e) == apply(remote, ns, ops, ids_r)
        assert check_links(embedded, ns, ids_e) == check_links(remote, ns, ids_r)
        claim_e = embedded.current_claim(ns, "user:1", "city")
        assert claim_e == remote.current_claim(ns, "user:1", "city")
        events_e = embedded.events(ns, limit=10_000)[0]
        events_r = remote.events(ns, limit=10_000)[0]
        assert normalise(events_e) == normalise(events_r)
        assert embedded.claim_group(ns, "user:1", "city") == remote.claim_group(
            ns, "user:1", "city"
        )
        assert embedded.source_stats(ns, SOURCES) == remote.source_stats(ns, SOURCES)
        for at in (NOW, NOW + 30, NOW + 4000):
            assert embedded.due_for_review(ns, now=at, limit=7) == remote.due_for_review(
                ns, now=at, limit=7
            )
    finally:
        remote.close()
