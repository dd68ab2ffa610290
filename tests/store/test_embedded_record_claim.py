"""The embedded store's `record_claim`: one Record is ONE op of the SQLite log (one
transaction), applied by one apply function, so a killed process keeps all of it or
none. Each scenario runs on a persistent store and, as the reference, on an in-memory
store through the base class's default (the primitives one after the other): the
outcomes, and everything the stores hold (records, statuses, history, claims, groups,
counters, source statistics, events, review schedule), are equal, also after a reopen
replays the log."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage import AlreadyExistsError, NotFoundError, TransitionError
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord, Status
from memlineage.store import LineageStore
from memlineage.store.base import ClaimMovedError, RecordOutcome
from memlineage.store.embedded import EmbeddedStore
from memlineage.store.embedded.persistence import DB_NAME
from support.memories import NOW, memory
from support.sidecar import BUNDLED_POLICIES

NS = "claims"
mem = partial(memory, ns=NS)
CITY = {"subject": "user:1", "attribute": "city"}
COUNT = "calls:user:alice"
Step = tuple[MemoryRecord, dict[str, Any]]


def lineage(store: EmbeddedStore) -> None:
    """a (the claim's holder) <- b <- c, and an unrelated x; through the primitives."""
    store.record(mem("a", value="Paris", **CITY), now=NOW - 60)
    store.record(mem("b", "a"), now=NOW - 50)
    store.record(mem("c", "b"), now=NOW - 40)
    store.record(mem("x"), now=NOW - 30)


SUPERSEDE: Step = (mem("a2", value="Rome", **CITY), {"supersede": "a", "count": COUNT})
OTHER = {"creator_id": "agent:x", "creator_kind": "agent"}

SCENARIOS: dict[str, list[Step]] = {
    "no-claim": [(mem("n", "b"), {"count": COUNT}), (mem("m"), {})],
    "supersede-same-source": [SUPERSEDE],
    "contradict-other-source": [
        (mem("a2", value="Rome", **OTHER, **CITY), {"holder": "a", "count": "calls:agent:x"})
    ],
    "confirm-other-source": [
        (mem("a2", value="Paris", **OTHER, **CITY), {"holder": "a", "count": "calls:agent:x"})
    ],
    "identical-retry": [SUPERSEDE, SUPERSEDE, (SUPERSEDE[0], {})],
    "other-memory-same-id": [
        SUPERSEDE,
        (mem("a2", value="Oslo", **CITY), {"count": COUNT}),
        (mem("a2", value="Rome", **OTHER, **CITY), {}),
    ],
    "moved-holder": [
        SUPERSEDE,
        (mem("a3", value="Oslo", **CITY), {"supersede": "a", "count": COUNT}),
        (mem("a3", value="Oslo", **CITY), {"holder": None, "count": COUNT}),
        (mem("a3", value="Oslo", **CITY), {"supersede": "a2", "count": COUNT}),
    ],
    "tainted-dependency": [
        SUPERSEDE,
        (
            mem("d", "c", value="Nice", subject="user:1", attribute="home"),
            {"holder": None, "count": COUNT},
        ),
    ],
    "chain-of-supersessions": [
        SUPERSEDE,
        (mem("b2", "a2"), {"count": COUNT}),
        (mem("a3", value="Oslo", **CITY), {"supersede": "a2", "count": COUNT}),
    ],
}


def ops(data: Path) -> list[dict[str, Any]]:
    con = sqlite3.connect(f"{(data / DB_NAME).as_uri()}?mode=ro", uri=True)
    try:
        return [json.loads(op) for (op,) in con.execute("SELECT op FROM ops ORDER BY seq")]
    finally:
        con.close()


def dump(store: EmbeddedStore) -> dict[str, Any]:
    """Everything the store holds, namespace by namespace (row stamps aside)."""
    return {
        ns: {
            "rows": {i: r.record() for i, r in sp.rows.items()},
            "claims": dict(sp.claims),
            "groups": {k: list(v) for k, v in sp.groups.items()},
            "counters": {k: list(v) for k, v in sp.counters.items()},
            "sources": {k: list(v) for k, v in sp.sources.items()},
            "events": list(sp.events),
            "seq": sp.seq,
            "review": dict(sp.review.next),
        }
        for ns, sp in store._spaces.items()
    }


def outcome(call: Callable[[], RecordOutcome]) -> object:
    try:
        return call()
    except (AlreadyExistsError, ClaimMovedError, NotFoundError, TransitionError) as exc:
        return type(exc).__name__, getattr(exc, "holder", None), str(exc)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_one_op_per_record_and_the_same_outcome_as_the_composed_primitives(
    name: str, tmp_path: Path
) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    reference = EmbeddedStore(clock=ManualClock(NOW))
    for s in (store, reference):
        lineage(s)
    for i, (rec, kw) in enumerate(SCENARIOS[name]):
        at = NOW + i
        before = len(ops(tmp_path))
        got = outcome(lambda: store.record_claim(rec, now=at, **kw))  # noqa: B023
        want = outcome(lambda: LineageStore.record_claim(reference, rec, now=at, **kw))  # noqa: B023
        assert got == want, (i, rec.id)
        written = ops(tmp_path)[before:]
        if isinstance(got, RecordOutcome) and not got.replayed:
            assert [op["o"] for op in written] == ["R"], (i, rec.id)  # ONE op, one commit
        else:
            assert written == [], (i, rec.id)  # a replay or a refusal writes nothing
        assert dump(store) == dump(reference), (i, rec.id)
    store.close()
    again = EmbeddedStore(tmp_path, clock=ManualClock(NOW))  # replay of the log
    try:
        assert dump(again) == dump(reference)
        again.compact()  # and a snapshot of what the op built
    finally:
        again.close()
    snapshot = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    try:
        assert ops(tmp_path) == []
        assert dump(snapshot) == dump(reference)
    finally:
        snapshot.close()


def test_the_supersession_and_its_cascade_are_in_the_op(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    lineage(store)
    out = store.record_claim(SUPERSEDE[0], now=NOW, **SUPERSEDE[1])
    assert (out.superseded_id, out.affected, out.replayed) == ("a", ("b", "c"), False)
    (op,) = ops(tmp_path)[4:]
    assert (op["o"], op["r"]["id"], op["s"], op["w"], op["k"]) == (
        "R",
        "a2",
        "a",
        "superseded by a2",
        COUNT,
    )
    store.close()
    again = EmbeddedStore(tmp_path)
    try:
        assert again.current_claim(NS, "user:1", "city").id == "a2"  # type: ignore[union-attr]
        assert (again.get(NS, "a").status, again.get(NS, "a").successor) == (
            Status.SUPERSEDED,
            "a2",
        )
        assert [again.get(NS, i).status for i in "bc"] == [Status.PENDING_VERIFICATION] * 2
        assert again.count(NS, COUNT, 60, now=NOW) == 1
        replay = again.record_claim(SUPERSEDE[0], now=NOW + 9, **SUPERSEDE[1])
        assert (replay.superseded_id, replay.affected, replay.replayed) == ("a", ("b", "c"), True)
    finally:
        again.close()


def test_a_refused_supersession_writes_nothing(tmp_path: Path) -> None:
    """The composed default would have written the record and its count before the
    supersession refused; one op checks all of it first."""
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    lineage(store)
    store.revoke(NS, "x", reason="wrong")
    before, state = ops(tmp_path), dump(store)
    with pytest.raises(TransitionError):
        store.record_claim(mem("x2"), now=NOW, supersede="x", count=COUNT)
    with pytest.raises(NotFoundError):
        store.record_claim(mem("x2"), now=NOW, supersede="nobody", count=COUNT)
    assert ops(tmp_path) == before and dump(store) == state
    with pytest.raises(NotFoundError):
        store.get(NS, "x2")
    store.close()


def test_a_record_derived_from_the_holder_is_reached_by_its_cascade(tmp_path: Path) -> None:
    """The new memory built on the holder's lineage is marked by the supersession it
    starts; the outcome is the memory as stored after the whole step (as Redis answers)."""
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    reference = EmbeddedStore(clock=ManualClock(NOW))
    for s in (store, reference):
        lineage(s)
    rec = mem("a2", "b", value="Rome", **CITY)
    out = store.record_claim(rec, now=NOW, supersede="a", count=COUNT)
    LineageStore.record_claim(reference, rec, now=NOW, supersede="a", count=COUNT)
    assert dump(store) == dump(reference)
    assert out.affected == ("b", "c", "a2")
    assert out.memory == store.get(NS, "a2")
    assert out.memory.status == Status.PENDING_VERIFICATION
    assert len(ops(tmp_path)) == 5
    store.close()


def test_the_op_moves_the_write_counters_and_stamps(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    lineage(store)
    epoch, mark = store.epoch, store.change_mark()
    store.record_claim(mem("n"), now=NOW, count=COUNT)  # no claim, counted
    assert store.epoch == epoch + 1
    assert store.unchanged_since(NS, ["a", "b"], mark)  # source statistics untouched
    assert not store.unchanged_since(NS, ["a", "b"], mark, counters=True)
    assert not store.unchanged_since(NS, ["n"], mark)
    mark = store.change_mark()
    store.record_claim(
        mem("h", value="yes", subject="user:2", attribute="home"), now=NOW, holder=None
    )  # a claim that meets no other source's, not counted: no statistics move
    assert store.unchanged_since(NS, ["x"], mark, counters=True)
    assert not store.unchanged_since(NS, ["h"], mark)
    mark = store.change_mark()
    store.record_claim(SUPERSEDE[0], now=NOW, **SUPERSEDE[1])  # counted
    assert not store.unchanged_since(NS, ["x"], mark, counters=True)
    assert store.epoch == epoch + 3
    assert [op["o"] for op in ops(tmp_path)[4:]] == ["R", "R", "R"]
    store.close()


def test_a_contradiction_moves_the_statistics_of_both_sources_only(tmp_path: Path) -> None:
    """Source statistics are stamped per source: a claim contradicting another
    source's moves those two, so what was read of a third source still stands."""
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    lineage(store)  # user:alice's
    store.record(mem("y", creator_id="agent:y", creator_kind="agent"), now=NOW - 20)
    mark = store.change_mark()
    contradiction = mem("a2", value="Rome", **OTHER, **CITY)
    store.record_claim(contradiction, now=NOW, holder="a", count="calls:agent:x")
    assert store.get(NS, "a").contradicted_by == ("agent:x",)
    assert not store.unchanged_since(NS, ["x"], mark)  # user:alice's statistics moved
    assert store.unchanged_since(NS, ["y"], mark)  # agent:y's did not
    store.close()


def test_an_engine_record_is_one_op(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    store = EmbeddedStore(tmp_path, clock=clock)
    engine = Engine(store, PolicyHolder(BUNDLED_POLICIES), clock=clock, record_access=False)
    assert engine.record(mem("a", value="Paris", **CITY)).recorded
    assert engine.record(mem("b", "a", creator_id="agent:planner", creator_kind="agent")).recorded
    first = engine.record(mem("a2", value="Rome", **CITY))
    assert (first.recorded, first.superseded_id, first.affected_ids) == (True, "a", ("b",))
    assert [op["o"] for op in ops(tmp_path)] == ["R", "R", "R"]
    assert store.count(NS, COUNT, 60, now=NOW) == 2
    store.close()
