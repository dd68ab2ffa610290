"""Versions of a memory (`revise`, `versions`) on embedded, redis and cluster: the new
version with its moved derivation links, the old one kept, the cascade with its events,
and every refusal (stale version, cycle, unknown dependency, status, claim) writing
nothing. The embedded store's revision is one op of its log: it survives a restart
and a compaction, and a log with an op it does not know refuses to open."""

from __future__ import annotations

import json
import sqlite3
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from memlineage.lineage import (
    AlreadyExistsError,
    CycleError,
    ManualClock,
    NotFoundError,
    Status,
    TransitionError,
    UnknownDependencyError,
    ValidationError,
    VersionConflictError,
)
from memlineage.lineage.errors import LineageError
from memlineage.store import EmbeddedStore, LineageStore, open_store
from memlineage.store.embedded import persistence
from memlineage.store.embedded.codec import StoreCorruptError
from memlineage.store.embedded.persistence import DB_NAME
from support.memories import NOW, memory

NS = "tenant-r"
mem = partial(memory, ns=NS)
TOOL = {"creator_kind": "tool", "creator_id": "tool:fix"}


def graph(store: LineageStore) -> None:
    """p1, p2 (parents); a on p1; b on a; c on b; x alone."""
    store.record(mem("p1"))
    store.record(mem("p2"))
    store.record(mem("a", "p1", tags=("t1",)))
    store.record(mem("b", "a"))
    store.record(mem("c", "b"))
    store.record(mem("x"))


def state(store: LineageStore) -> dict[str, Any]:
    """Everything a refused revision must leave as it was."""
    ids = ["p1", "p2", "a", "b", "c", "x"]
    return {
        "records": store.get_many(NS, ids, with_history=True),
        "versions": {i: store.versions(NS, i) for i in ids},
        "events": store.events(NS)[0],
    }


def test_a_revision_is_a_new_version_with_the_old_one_kept(store: LineageStore) -> None:
    graph(store)
    cursor = store.latest_cursor(NS)
    out = store.revise(
        mem("a", "p2", tags=("t2",), creator_confidence=0.6, **TOOL), expected_version=1
    )
    a = store.get(NS, "a")
    assert out.memory == a
    assert (a.version, a.dependencies, a.tags, a.creator_id, a.creator_confidence) == (
        2,
        ("p2",),
        ("t2",),
        "tool:fix",
        0.6,
    )
    assert a.status == Status.ACTIVE and a.derivations == ("b",)
    assert out.previous_version == 1
    assert store.get(NS, "p1").derivations == ()
    assert store.get(NS, "p2").derivations == ("a",)
    (old,) = store.versions(NS, "a")
    assert (old.version, old.dependencies, old.tags, old.creator_id) == (
        1,
        ("p1",),
        ("t1",),
        "user:alice",
    )
    # the descendants: pending, history naming the revised memory
    assert out.affected == ("b", "c")
    for i in ("b", "c"):
        r = store.get(NS, i)
        assert r.status == Status.PENDING_VERIFICATION and r.version == 2
        assert r.status_history[-1].root_id == "a"
        assert r.status_history[-1].reason == "ancestor revised: version 1 replaced"
    events, _ = store.events(NS, after=cursor)
    assert [(e.type, e.memory_id) for e in events] == [("updated", "a"), ("cascaded", "a")]
    assert (events[0].version, events[0].affected, events[0].status) == (2, ("p2",), "active")
    assert events[0].reason == "revised: version 1 replaced"
    assert (events[1].root_id, events[1].affected) == ("a", ("b", "c"))
    # a second revision: the chain, newest first
    store.revise(mem("a", "p1", "p2"), expected_version=2)
    assert [v.version for v in store.versions(NS, "a")] == [2, 1]
    assert store.get(NS, "p1").derivations == ("a",)
    assert store.versions(NS, "b") == ()


def test_a_retried_record_is_judged_against_what_it_recorded_not_a_revision(
    store: LineageStore,
) -> None:
    """After a revision, a retry of the original Record (identical) is that Record
    replayed, and the revision's fields proposed by a Record are another memory under
    an existing id: the same answer on every backend (embedded compared the retry with
    the revised memory and answered the opposite of Redis; an outside audit)."""
    original = mem("m", tags=("a",))
    store.record_claim(original, now=NOW)
    store.revise(mem("m", tags=("b",)), expected_version=1, now=NOW + 1)
    retry = store.record_claim(mem("m", tags=("a",)), now=NOW + 2)
    assert retry.replayed and retry.memory.version == 2  # as stored now
    with pytest.raises(AlreadyExistsError):
        store.record_claim(mem("m", tags=("b",)), now=NOW + 3)


def test_refusals_write_nothing(store: LineageStore) -> None:
    graph(store)
    store.revoke(NS, "x")
    before = state(store)
    refusals: list[tuple[Any, type[LineageError], str]] = [
        (mem("a", "p2"), VersionConflictError, "at version 1, not 2"),
        (mem("a", "c"), CycleError, "would make a cycle a -> c -> b -> a"),
        (mem("a", "p2", "nope"), UnknownDependencyError, "'nope'"),
        (mem("a", "a"), CycleError, "cannot depend on itself"),
        (mem("a", subject="u", attribute="city", value="Rome"), ValidationError, "claim"),
        (mem("x"), TransitionError, "is revoked"),
        (mem("ghost"), NotFoundError, "ghost"),
    ]
    for proposed, error, text in refusals:
        expected = 2 if error is VersionConflictError else (2 if proposed.id == "x" else 1)
        with pytest.raises(error) as caught:
            store.revise(proposed, expected_version=expected)
        assert text in str(caught.value), (text, caught.value)
    cycle = pytest.raises(CycleError)
    with cycle as caught:
        store.revise(mem("a", "p2", "c"), expected_version=1)
    assert caught.value.field == "dependencies[1]"
    assert state(store) == before


def test_a_tainted_dependency_makes_the_version_pending_and_a_clean_one_active(
    store: LineageStore,
) -> None:
    graph(store)
    store.revoke(NS, "p2")
    out = store.revise(mem("a", "p2"), expected_version=1)
    assert out.memory.status == Status.PENDING_VERIFICATION
    assert out.memory.status_history[-1][1:] == (
        "active",
        "pending_verification",
        "dependency revoked",
        "p2",
    )
    back = store.revise(mem("a", "p1"), expected_version=2)
    assert back.memory.status == Status.ACTIVE
    assert back.memory.status_history[-1][1:] == ("pending_verification", "active", "revised", "a")


def test_a_new_value_drops_the_old_comparisons(store: LineageStore) -> None:
    city = {"subject": "user:1", "attribute": "city"}
    store.record(mem("a", value="Paris", **city))
    store.record(mem("o", value="Paris", creator_id="agent:o", creator_kind="agent", **city))
    assert store.get(NS, "a").confirmed_by == ("agent:o",)
    same = store.revise(mem("a", value="Paris", tags=("k",), **city), expected_version=1)
    assert same.memory.confirmed_by == ("agent:o",)
    moved = store.revise(mem("a", value="Rome", **city), expected_version=2)
    assert (moved.memory.value, moved.memory.confirmed_by) == ("Rome", ())
    assert store.current_claim(NS, "user:1", "city") is not None


def test_concurrent_revisions_of_one_version_apply_once(store: LineageStore) -> None:
    graph(store)
    results: list[object] = []
    lock = threading.Lock()

    def go(i: int) -> None:
        try:
            out: object = store.revise(mem("a", "p2", tags=(f"r{i}",)), expected_version=1)
        except VersionConflictError as err:
            out = err
        with lock:
            results.append(out)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(not isinstance(r, VersionConflictError) for r in results) == 1
    assert store.get(NS, "a").version == 2
    assert [v.version for v in store.versions(NS, "a")] == [1]
    assert store.get(NS, "p2").derivations == ("a",)


# -- embedded: one op of the log --------------------------------------------------------


def test_embedded_revisions_survive_restart_and_compaction(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    store = EmbeddedStore(tmp_path, clock=clock)
    graph(store)
    store.revise(mem("a", "p2", **TOOL), expected_version=1)
    store.revise(mem("a", "x"), expected_version=2)
    before = state(store)
    store.close()
    for compact in (False, True):
        again = EmbeddedStore(tmp_path, clock=clock)
        assert state(again) == before
        assert [v.version for v in again.versions(NS, "a")] == [2, 1]
        assert again.get(NS, "x").derivations == ("a",)
        if compact:
            again.compact()
        again.close()
    final = EmbeddedStore(tmp_path, clock=clock)
    assert state(final) == before
    final.close()
    assert persistence.check(tmp_path).records == 6


def test_a_format_1_database_opens_and_is_marked_2(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    graph(store)
    store.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("UPDATE meta SET value = '1' WHERE key = 'format'")
    store = EmbeddedStore(tmp_path)
    assert store.get(NS, "a").dependencies == ("p1",)
    store.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("2",)


def test_an_op_of_unknown_kind_refuses_to_open(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    graph(store)
    store.close()
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        (seq,) = db.execute("SELECT MAX(seq) FROM ops").fetchone()
        text = json.dumps({"o": "Z", "n": NS}, separators=(",", ":"))
        db.execute(
            "INSERT INTO ops (seq, op, crc) VALUES (?, ?, ?)",
            (seq + 1, text, persistence.crc(seq + 1, text)),
        )
    with pytest.raises(StoreCorruptError, match="unknown op kind 'Z'"):
        EmbeddedStore(tmp_path)


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        (b'["id","a",', "entry 0 is not a record hash as JSON"),
        (b"[" * 5000, "entry 0 is not a record hash as JSON"),  # past the parser's depth
        (b'{"id":"a"}', "entry 0 is not a record hash as JSON (not a JSON list of strings)"),
    ],
    ids=["not-json", "nested-past-the-parser", "an-object"],
)
def test_a_corrupt_kept_version_on_redis_is_refused_naming_its_entry(
    redis_server: Any, stored: bytes, problem: str
) -> None:
    """Redis keeps each earlier version as a JSON entry of a list, bytes anyone with
    access to Redis may have changed: a damaged entry is StoreCorruptError naming the
    key and the entry, never another exception (one nested past the JSON parser's
    depth raised RecursionError)."""
    store = open_store(redis_server.emptied())
    try:
        graph(store)
        store.revise(mem("a", "p2"), expected_version=1)
        key = store.keys.versions(NS, "a")
        store.client.lset(key, 0, stored)
        with pytest.raises(StoreCorruptError) as refused:
            store.versions(NS, "a")
        assert refused.value.path == key and problem in refused.value.problem, refused.value
    finally:
        store.close()
