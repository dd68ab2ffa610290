"""Restarts lose nothing: the embedded data directory (SQLite) and redis-server with AOF.

``state`` includes the whole lineage event log with its cursors, so every restart
test also checks that readers can resume from the same cursors afterwards."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from memlineage.lineage import (
    CursorExpiredError,
    ManualClock,
    MemoryRecord,
    Status,
    StoreLimits,
    StoreUnavailableError,
)
from memlineage.store import EmbeddedStore, LineageStore, open_store
from memlineage.store.embedded import persistence
from memlineage.store.embedded.dir_lock import LOCK_NAME
from memlineage.store.embedded.op_head import HEAD_NAME
from memlineage.store.embedded.persistence import DB_NAME
from support.memories import NOW
from support.redis_servers import start_redis_server

NS = "tenant:p"
IDS = ["root", "a", "b", "c", "old", "new", "lonely", "b2", "b3"]
SOURCES = ["user:u", "tool:t", "agent:p", "nobody"]


def populate(store: LineageStore) -> None:
    """Exercise every kind of write once, so replay/AOF has all of them to restore."""
    store.record(MemoryRecord(id="root", namespace=NS, creator_id="user:u", tags=("x", "y")))
    store.record(
        MemoryRecord(
            id="a", namespace=NS, creator_id="tool:t", creator_kind="tool", dependencies=("root",)
        )
    )
    store.record(
        MemoryRecord(
            id="b",
            namespace=NS,
            creator_id="tool:t",
            dependencies=("a",),
            subject="user:1",
            attribute="city",
            value="Paris",
        )
    )
    store.record(MemoryRecord(id="c", namespace=NS, creator_id="agent:p", dependencies=("a", "b")))
    store.record(
        MemoryRecord(
            id="b2",
            namespace=NS,
            creator_id="agent:p",
            subject="user:1",
            attribute="city",
            value="Paris",
        )
    )  # confirms b
    store.record(
        MemoryRecord(
            id="b3",
            namespace=NS,
            creator_id="user:u",
            subject="user:1",
            attribute="city",
            value="Rome",
        )
    )  # contradicts b and b2
    store.record(
        MemoryRecord(
            id="old",
            namespace=NS,
            creator_id="user:u",
            subject="user:1",
            attribute="airline",
            value="AF",
        )
    )
    store.record(
        MemoryRecord(
            id="new",
            namespace=NS,
            creator_id="user:u",
            subject="user:1",
            attribute="airline",
            value="KL",
        )
    )
    store.record(MemoryRecord(id="lonely", namespace=NS, creator_id="user:u", value="v"))
    store.revoke(NS, "root", reason="withdrawn", now=NOW + 1)
    store.confirm(NS, "c", now=NOW + 2)
    store.supersede(NS, "old", "new", now=NOW + 3)
    store.update(NS, "lonely", 1, {"value": "w", "tags": ["t"]})
    store.add_dependencies(NS, "lonely", ["new"], expected_version=2)
    store.record_access(NS, ["a", "lonely"], now=NOW + 4)
    store.record_access(NS, ["a"], now=NOW + 5)
    for t in (NOW, NOW + 10, NOW + 20):
        store.incr_counter(NS, "tool:flight_api", now=t)
    store.feedback(NS, ["a", "b2", "ghost"], True, now=NOW + 6)
    store.feedback(NS, ["lonely"], False, now=NOW + 6)
    store.schedule_review(NS, {"a": NOW + 50, "b": NOW + 7200}, now=NOW + 6)
    store.unschedule_review(NS, ["c"])
    store.record(MemoryRecord(id="elsewhere", namespace="tenant:q", creator_id="user:u"))


def state(store: LineageStore) -> dict[str, object]:
    claim = store.current_claim(NS, "user:1", "airline")
    events, cursor = store.events(NS, limit=10_000)
    return {
        "records": store.get_many(NS, IDS),
        "events": events,
        "cursor": cursor,
        "count": store.count(NS, "tool:flight_api", 3600, now=NOW + 30),
        "claim": claim.id if claim else None,
        "city": store.current_claim(NS, "user:1", "city"),
        "group": store.claim_group(NS, "user:1", "city"),
        "stats": store.source_stats(NS, SOURCES),
        "due": store.due_for_review(NS, now=NOW + 10**7, limit=100),
        "namespaces": store.namespaces(),
    }


def test_populate_covers_what_we_think(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    populate(store)
    s = state(store)
    records = s["records"]
    assert isinstance(records, dict)
    assert [records[i].status for i in ("root", "a", "b", "c", "old")] == [
        "revoked",
        "pending_verification",
        "pending_verification",
        "active",
        "superseded",
    ]
    assert (records["a"].access_count, records["a"].last_access) == (2, NOW + 5)
    assert (s["count"], s["claim"]) == (3, "new")
    assert [(r.id, r.confirmed_by, r.contradicted_by) for r in s["group"]] == [  # type: ignore[attr-defined]
        ("b", ("agent:p",), ("user:u",)),
        ("b2", ("tool:t",), ("user:u",)),
        ("b3", (), ("agent:p", "tool:t")),
    ]
    assert s["stats"] == {
        "user:u": (0.0, 3.0),
        "tool:t": (2.0, 1.0),
        "agent:p": (2.0, 1.0),
        "nobody": (0.0, 0.0),
    }
    assert (records["a"].uses_ok, records["lonely"].uses_failed) == (1, 1)
    assert (records["a"].reviewed_at, records["c"].reviewed_at) == (NOW + 6, None)
    first = sorted(i for i in IDS if i not in ("a", "b", "c"))
    assert s["due"] == ["a", *first, "b"]  # a at +50, the rest at +3600 by id, b at +7200
    assert s["namespaces"] == [NS, "tenant:q"]
    events = s["events"]
    assert isinstance(events, list)
    assert [e.type for e in events].count("cascaded") == 1
    assert [e.cursor for e in events] == [str(i) for i in range(1, len(events) + 1)]
    store.close()


def test_embedded_cursors_resume_after_restart(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    populate(store)
    middle = store.events(NS, limit=5)[1]
    rest, last = store.events(NS, after=middle, limit=10_000)
    store.close()
    reopened = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    assert reopened.events(NS, after=middle, limit=10_000) == (rest, last)
    assert reopened.latest_cursor(NS) == last
    reopened.record(MemoryRecord(id="after", namespace=NS, creator_id="user:u"))
    new, _ = reopened.events(NS, after=last)
    assert [(e.cursor, e.memory_id) for e in new] == [(str(int(last) + 1), "after")]
    reopened.compact()
    reopened.revoke(NS, "after", now=NOW + 9)
    everything = reopened.events(NS, limit=10_000)
    reopened.close()
    third = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    assert third.events(NS, limit=10_000) == everything
    assert third.events(NS, after=middle, limit=10_000)[0] == everything[0][5:]
    third.close()


def test_embedded_retention_survives_compaction(tmp_path: Path) -> None:
    limits = StoreLimits(event_retention=5)
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW), limits=limits)
    for i in range(12):
        store.record(MemoryRecord(id=f"m{i}", namespace=NS, creator_id="user:u"))
    store.compact()
    store.close()
    reopened = EmbeddedStore(tmp_path, clock=ManualClock(NOW), limits=limits)
    events, last = reopened.events(NS)
    assert [e.cursor for e in events] == ["8", "9", "10", "11", "12"] and last == "12"
    with pytest.raises(CursorExpiredError):
        reopened.events(NS, after="6")
    assert reopened.events(NS, after="7")[0] == events
    reopened.close()


def test_embedded_restart_restores_everything(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    populate(store)
    before = state(store)
    store.close()
    reopened = open_store(f"embedded://{tmp_path}", clock=ManualClock(NOW))
    assert state(reopened) == before
    # The reopened store keeps working and appending.
    reopened.record(
        MemoryRecord(id="after", namespace=NS, creator_id="user:u", dependencies=("c",))
    )
    reopened.close()
    again = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    assert again.get(NS, "c").derivations == ("after",)
    again.close()


def test_embedded_survives_a_crash_without_close(tmp_path: Path) -> None:
    """A process that wrote and ended without close (os._exit, forked): the next one to
    open the directory (its lock gone with the process) sees every acknowledged write."""
    pid = os.fork()
    if pid == 0:  # the child: write, then end without closing anything
        try:
            populate(EmbeddedStore(tmp_path, clock=ManualClock(NOW)))
        finally:
            os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    reference = EmbeddedStore(clock=ManualClock(NOW))
    populate(reference)
    survivor = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    assert state(survivor) == state(reference)
    survivor.close()


def test_embedded_compaction_then_restart(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    populate(store)
    store.compact()  # the snapshot replaces every op so far, in the database
    store.revoke(NS, "new", now=NOW + 6)  # one op after the snapshot
    before = state(store)
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [HEAD_NAME, DB_NAME, LOCK_NAME]
    summary = persistence.check(tmp_path)
    assert (summary.ops, summary.last_seq - summary.snapshot_seq) == (1, 1)
    reopened = EmbeddedStore(tmp_path, clock=ManualClock(NOW))
    assert state(reopened) == before
    assert before["claim"] is None  # released by the revoke after the snapshot
    reopened.close()


def test_embedded_imports_an_old_log_with_a_torn_last_line(tmp_path: Path) -> None:
    """A data directory of the JSON-lines log (before SQLite) is imported: a torn last
    line (a crash mid-write, never acknowledged) is left out, everything else kept."""
    store = EmbeddedStore(tmp_path / "new", clock=ManualClock(NOW))
    populate(store)
    before = state(store)
    store.close()
    with sqlite3.connect(tmp_path / "new" / DB_NAME) as con:  # the ops are the log's lines
        lines = [op for (op,) in con.execute("SELECT op FROM ops ORDER BY seq")]
    con.close()
    old = tmp_path / "old"
    old.mkdir()
    (old / "log.0.jsonl").write_text(
        "\n".join(lines) + "\n" + '{"o":"r","n":"tenant:p","r":{"id":"half'
    )
    reopened = EmbeddedStore(old, clock=ManualClock(NOW))
    assert state(reopened) == before
    reopened.record(MemoryRecord(id="next", namespace=NS, creator_id="user:u"))
    reopened.close()
    assert sorted(p.name for p in old.iterdir()) == [
        HEAD_NAME,
        DB_NAME,
        LOCK_NAME,
        "log.0.jsonl.imported",
    ]
    third = EmbeddedStore(old, clock=ManualClock(NOW))
    assert third.get(NS, "next").id == "next"
    assert third.get(NS, "root").status == "revoked"
    third.close()


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_redis_restart_with_aof_restores_everything(tmp_path: Path, hard: bool) -> None:
    server = start_redis_server(tmp_path / "redis")
    try:
        store = open_store(server.url, clock=ManualClock(NOW))
        populate(store)
        before = state(store)
        middle = store.events(NS, limit=5)[1]
        server.restart(hard=hard)
        # Same client: reconnects, and reloads the Lua scripts the restart forgot.
        assert state(store) == before
        events = before["events"]
        assert isinstance(events, list)
        assert store.events(NS, after=middle, limit=10_000)[0] == events[5:]
        store.revoke(NS, "new")
        assert store.current_claim(NS, "user:1", "airline") is None
        new, _ = store.events(NS, after=before["cursor"])  # type: ignore[arg-type]
        assert [(e.type, e.memory_id, e.affected) for e in new] == [
            ("status_changed", "new", ()),
            ("cascaded", "new", ("lonely",)),
        ]
        store.close()
    finally:
        server.stop()


def test_redis_down_is_store_unavailable(tmp_path: Path) -> None:
    server = start_redis_server(tmp_path / "redis")
    store = open_store(server.url, clock=ManualClock(NOW), socket_timeout=2)
    try:
        store.record(MemoryRecord(id="m", namespace=NS, creator_id="user:u"))
        server.stop()
        for call in (
            lambda: store.get(NS, "m"),
            lambda: store.record(MemoryRecord(id="n", namespace=NS, creator_id="user:u")),
            lambda: store.set_status(NS, "m", Status.ARCHIVED),
            lambda: store.count(NS, "c", 60),
        ):
            with pytest.raises(StoreUnavailableError) as err:
                call()
            assert err.value.grpc_status == "UNAVAILABLE"
        server.start()
        assert store.get(NS, "m").status == "active"
    finally:
        store.close()
        server.stop()
