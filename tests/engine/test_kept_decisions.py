"""Decisions kept in the store (engine/decision_store.py): queued on the request path,
written in batches, found by Explain and Feedback after a restart and from another
sidecar's engine; the newest `decision_retention` per namespace."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.errors import (
    NotFoundError,
    StoreCorruptError,
    StoreUnavailableError,
)
from memlineage.lineage.model import MemoryRecord
from memlineage.store import LineageStore, open_store
from memlineage.store.embedded import EmbeddedStore
from memlineage.store.embedded.persistence import DB_NAME
from memlineage_dsl.facts import Creator
from support.memories import T0
from support.redis_servers import RedisClusterHandle, RedisServer
from support.sidecar import BUNDLED_POLICIES

NS = "ns"
ALICE = Creator("user", "user:alice")


def _engine(store: LineageStore, clock: ManualClock) -> Engine:
    return Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=clock)


def _decide(engine: Engine, clock: ManualClock) -> list[str]:
    """A Record, Checks (one reissued from its ticket), a FilterRank: every way a
    decision is issued (`put`, `put_issue`, `put_many`). Their ids, oldest first."""
    ids = [
        engine.record(
            MemoryRecord(id="city", namespace=NS, creator_id="user:alice"), ALICE
        ).decision.decision_id
    ]
    engine.record(
        MemoryRecord(
            id="guess",
            namespace=NS,
            creator_id="reasoning:planner",
            creator_kind="reasoning",
            creator_confidence=0.3,
        ),
        ALICE,
    )
    clock.advance(1)
    rec, ticket = engine.check_ticketed(NS, "read", ["city"], ALICE)
    ids.append(rec.decision_id)
    assert ticket is not None
    clock.advance(1)
    again = engine.reissue(ticket)
    assert again is not None
    ids.append(again[0])
    clock.advance(1)
    ids += [c.decision.decision_id for c in engine.filter_rank(NS, [("city", 0.9)], ALICE)]
    clock.advance(1)
    ids.append(engine.check(NS, "read", ["guess"], ALICE).decision_id)  # a DENY, reasons
    return ids


def _same(a: object, b: object) -> None:
    assert a == b, (a, b)


def test_embedded_data_dir_keeps_decisions_through_a_restart(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = EmbeddedStore(tmp_path, clock=clock)
    engine = _engine(store, clock)
    ids = _decide(engine, clock)
    assert store.kept_decisions(NS, "city", 20) == []  # nothing written on the request path
    assert engine.decisions.pending() == len(ids) + 1
    before = {r.decision_id: r for r in engine.explain(NS, "city").decisions}
    deny = engine.journal.get(NS, ids[-1])
    assert deny is not None and deny.decision.effect == "deny" and deny.decision.reasons
    assert engine.flush_decisions() == 0  # Explain flushed them
    assert [k.decision_id for k in store.kept_decisions(NS, "city", 20)] == ids[3::-1]
    store.close()

    store = EmbeddedStore(tmp_path, clock=clock)
    fresh = _engine(store, clock)  # a new journal: empty
    assert fresh.journal.get(NS, ids[0]) is None
    after = fresh.explain(NS, "city").decisions
    assert [r.decision_id for r in after] == ids[3::-1]  # newest first
    for r in after:
        _same(r, before[r.decision_id])  # effect, score, reasons, obligations, identity
    _same(fresh.explain(NS, "guess").decisions[0], deny)
    # Feedback names a decision from before the restart and no memory: its memories.
    assert fresh.feedback(NS, ids[-1], [], success=False) == 1
    assert store.get(NS, "guess").uses_failed == 1
    with pytest.raises(NotFoundError):  # another namespace's decision is not found
        fresh.feedback("other", ids[-1], [], success=True)
    store.close()


def test_in_memory_embedded_keeps_them_in_the_journal_only() -> None:
    clock = ManualClock(T0)
    engine = _engine(EmbeddedStore(clock=clock), clock)
    assert engine.journal.queue is None  # nothing queued per decision
    ids = _decide(engine, clock)
    assert [r.decision_id for r in engine.explain(NS, "city").decisions] == ids[3::-1]
    assert engine.flush_decisions() == 0


def test_embedded_retention_keeps_the_newest(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = EmbeddedStore(tmp_path, clock=clock)
    store.decision_retention = 5
    engine = _engine(store, clock)
    engine.record(MemoryRecord(id="m", namespace=NS, creator_id="user:alice"), ALICE)
    ids = []
    for _ in range(6):
        ids.append(engine.check(NS, "read", ["m"], ALICE).decision_id)
        clock.advance(1)
    engine.flush_decisions()
    for _ in range(6):
        ids.append(engine.check(NS, "read", ["m"], ALICE).decision_id)
        clock.advance(1)
    engine.flush_decisions()
    assert store._log is not None and store._log.decisions is not None
    assert store._log.decisions.count(NS) == 5
    assert [k.decision_id for k in store.kept_decisions(NS, "m", 50)] == ids[:-6:-1]
    assert store.kept_decision(NS, ids[0]) is None
    store.close()


@pytest.mark.parametrize("data_dir", [False, True], ids=["in-memory", "data-dir"])
def test_a_namespace_keeps_its_newest_whatever_other_namespaces_issue(
    tmp_path: Path, data_dir: bool
) -> None:
    """The journal was one ring of 100,000 for every namespace: another tenant's
    traffic ended a decision early (in memory, where the journal is the only copy),
    the moment a marker decision left told the total volume, and with a data dir the
    journal went on showing decisions past the store's `decision_retention` (an
    outside audit). Now each namespace keeps its newest `decision_retention`, in the
    journal as in the store: found by Explain and Feedback until its own namespace's
    decisions move it out, never by another's."""
    clock = ManualClock(T0)
    store = EmbeddedStore(tmp_path if data_dir else None, clock=clock)
    store.decision_retention = 5
    engine = _engine(store, clock)
    for ns in ("quiet", "busy"):
        engine.record(MemoryRecord(id="m", namespace=ns, creator_id="user:alice"), ALICE)
    marker = engine.check("quiet", "read", ["m"], ALICE).decision_id
    for _ in range(60):  # another tenant's volume
        clock.advance(1)
        engine.check("busy", "read", ["m"], ALICE)
        engine.filter_rank("busy", [("m", 0.9)], ALICE)
    assert marker in [r.decision_id for r in engine.explain("quiet", "m").decisions]
    assert engine.feedback("quiet", marker, [], True) == 1
    with pytest.raises(NotFoundError):
        engine.feedback("busy", marker, [], True)  # only in its own namespace
    for _ in range(5):  # its own namespace's newer decisions
        clock.advance(1)
        engine.check("quiet", "read", ["m"], ALICE)
    assert marker not in [r.decision_id for r in engine.explain("quiet", "m").decisions]
    with pytest.raises(NotFoundError):
        engine.feedback("quiet", marker, [], True)
    store.close()


class _Down(EmbeddedStore):
    down = False

    def keep_decisions(self, namespace, entries):  # type: ignore[no-untyped-def]
        if self.down:
            raise StoreUnavailableError("down")
        super().keep_decisions(namespace, entries)


def test_a_refused_batch_is_written_at_the_next_flush(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _Down(tmp_path, clock=clock)
    engine = _engine(store, clock)
    ids = _decide(engine, clock)
    store.down = True
    with pytest.raises(StoreUnavailableError):
        engine.flush_decisions()
    assert engine.decisions.pending() == len(ids) + 1
    store.down = False
    assert engine.flush_decisions() == len(ids) + 1
    assert store.kept_decision(NS, ids[0]) is not None
    store.close()


def test_decisions_are_refused_once_the_database_is_gone_from_its_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The data directory removed while the engine serves: the next flush of kept
    decisions is StoreUnavailableError naming the file, as every other write of the
    store, and keeps its batch for the next one; nothing of it is read back from the
    removed file (before: the batch was committed into it, counted as written and
    dropped from the queue, Explain read it from there, and it was gone at the next
    start)."""
    clock = ManualClock(T0)
    data = tmp_path / "data"
    store = EmbeddedStore(data, clock=clock)
    engine = _engine(store, clock)
    kept = _decide(engine, clock)
    assert engine.flush_decisions() == len(kept) + 1
    clock.advance(1)
    later = _decide(engine, clock)
    shutil.rmtree(data)
    gone = f"embedded store {data / DB_NAME}: the database is no longer at its path"
    with caplog.at_level("ERROR", logger="memlineage.store"):
        for _ in range(2):
            with pytest.raises(StoreUnavailableError, match=gone):
                engine.flush_decisions()
            assert engine.decisions.pending() == len(later) + 1  # retried, not dropped
    said = [r for r in caplog.records if "no longer the file it opened" in r.getMessage()]
    assert len(said) == 1
    assert [store.kept_decision(NS, i) for i in later] == [None] * len(later)
    assert all(store.kept_decision(NS, i) is not None for i in kept)  # as before
    assert not store.ping()
    store.close()
    assert not data.exists()


@pytest.fixture(params=["redis", "cluster"])
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        yield server.emptied()
    else:
        cluster: RedisClusterHandle = request.getfixturevalue("redis_cluster")
        yield cluster.emptied()


def test_two_engines_over_one_redis_share_decisions(redis_url: str) -> None:
    clock = ManualClock(T0)
    sa, sb = open_store(redis_url, clock=clock), open_store(redis_url, clock=clock)
    a, b = _engine(sa, clock), _engine(sb, clock)
    ids = _decide(a, clock)
    a.flush_decisions()  # what A's server loop does every access_flush_seconds
    mine = b.check(NS, "read", ["city"], ALICE)
    shown = b.explain(NS, "city").decisions
    assert [r.decision_id for r in shown] == [mine.decision_id, *ids[3::-1]]
    _same(shown[1], a.journal.get(NS, ids[3]))
    assert b.feedback(NS, ids[-1], [], success=False) == 1  # A's id, on B
    assert sb.get(NS, "guess").uses_failed == 1
    with pytest.raises(NotFoundError):  # another namespace's: as one never issued
        b.feedback("other", ids[-1], [], success=False)
    sa.close()
    sb.close()


def test_redis_retention_caps_the_stream(redis_url: str) -> None:
    clock = ManualClock(T0)
    store = open_store(redis_url, clock=clock)
    store.decision_retention = 7
    engine = _engine(store, clock)
    engine.record(MemoryRecord(id="m", namespace=NS, creator_id="user:alice"), ALICE)
    ids = []
    for _ in range(3):
        ids += [c.decision.decision_id for c in engine.filter_rank(NS, [("m", 0.5)] * 4, ALICE)]
        engine.check(NS, "read", ["m"], ALICE)
        engine.flush_decisions()
        clock.advance(1)
    xlen = store.decisions_kept(NS)  # type: ignore[attr-defined]
    assert xlen == 7
    index = store.client.hlen(store.keys.decision_index(NS))  # type: ignore[attr-defined]
    assert index == 7  # trimmed with the stream
    assert store.kept_decision(NS, ids[0]) is None
    assert store.kept_decision(NS, ids[-1]) is not None
    assert len(store.kept_decisions(NS, "m", 100)) == 7
    store.close()


def test_a_namespace_whose_decision_stream_is_of_another_type_fails_only_its_own_reads(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The flush before an Explain writes every namespace's decisions: one whose stream
    is of another Redis type is logged and retried, and the Explain of another
    namespace is answered (before, it failed with that namespace's key: DATA_LOSS
    naming it to a caller of another namespace, or INTERNAL)."""
    clock = ManualClock(T0)
    store = open_store(redis_url, clock=clock)
    engine = _engine(store, clock)
    engine.record(MemoryRecord(id="m", namespace="other", creator_id="user:alice"), ALICE)
    ids = _decide(engine, clock)
    broken = store.keys.decisions("other")  # type: ignore[attr-defined]
    store.client.set(broken, "x")  # type: ignore[attr-defined]

    with caplog.at_level(logging.ERROR, "memlineage.engine"):
        shown = engine.explain(NS, "city").decisions
    assert [r.decision_id for r in shown] == ids[3::-1]
    assert any(broken in r.getMessage() for r in caplog.records), caplog.records
    assert engine.decisions.pending() == 1  # other's, kept for the next flush
    with pytest.raises(StoreCorruptError) as err:  # other's own reads name its key
        engine.explain("other", "m")
    assert str(err.value).startswith(f"redis {broken} cannot be read: it holds a Redis string")

    caplog.clear()
    with caplog.at_level(logging.INFO, "memlineage.engine"):
        for _ in range(5):  # the sidecar flushes about once a second: said once a minute
            assert engine.flush_decisions() == 0
        assert [r for r in caplog.records if broken in r.getMessage()] == []
        store.client.delete(broken)  # type: ignore[attr-defined]
        assert engine.flush_decisions() == 1
        assert engine.flush_decisions() == 0
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said == [("INFO", "kept decisions of 'other' are written again")], said
    assert len(engine.explain("other", "m").decisions) == 1
    store.close()


def test_a_kept_decision_nested_past_the_parser_reads_as_none() -> None:
    """A store's kept decision is read back from bytes a damaged (or edited) store may
    hold: text nested deeper than the JSON parser goes is not one (before: a
    RecursionError out of Explain)."""
    from memlineage.engine.decision_store import record_of
    from memlineage.lineage.decisions import KeptDecision

    deep = "[" * 5000
    assert KeptDecision.from_json(deep) is None
    kept = KeptDecision("d1", "ns", "read", ("m1",), "agent:a", T0, "v1", "allow", deep)
    assert record_of(kept) is None
    assert KeptDecision.from_json(kept.to_json()) == kept  # a sound one still reads


def test_beside_a_store_that_keeps_decisions_the_journal_keeps_only_the_newest(
    tmp_path: Path,
) -> None:
    """A ring per namespace of `decision_retention` cost ~4 MB for each namespace ever
    served, also where the store keeps every decision itself (a review). Beside such
    a store the journal keeps 1,000 per namespace; Explain and Feedback still find the
    older ones in the store."""
    clock = ManualClock(T0)
    store = EmbeddedStore(tmp_path, clock=clock)
    engine = _engine(store, clock)
    assert engine.journal.limit == 1_000
    assert _engine(EmbeddedStore(clock=clock), clock).journal.limit == 10_000  # the only copy
    engine.record(MemoryRecord(id="m", namespace=NS, creator_id="user:alice"), ALICE)
    first = engine.check(NS, "read", ["m"], ALICE).decision_id
    for _ in range(1_000):
        engine.check(NS, "read", ["m"], ALICE)
    assert engine.journal.get(NS, first) is None  # past the journal's 1,000
    assert engine.feedback(NS, first, [], True) == 1  # found in the store
    store.close()
