"""The lineage event log (Watch stream) and cascade ``affected``: every backend."""

from __future__ import annotations

import threading
import time
from functools import partial

import pytest
from memlineage.lineage import (
    CursorExpiredError,
    LineageEvent,
    ManualClock,
    Status,
    StoreLimits,
    TransitionError,
    UnknownDependencyError,
    ValidationError,
    VersionConflictError,
)
from memlineage.store import LineageStore
from support.lineage_events import normalise, shifted
from support.memories import NOW, memory

NS = "tenant-e/user:1"
mem = partial(memory, ns=NS)


def ev(type: str, memory_id: str, at: float = NOW, **kw: object) -> LineageEvent:
    return LineageEvent(cursor="", type=type, namespace=NS, memory_id=memory_id, at=at, **kw)  # type: ignore[arg-type]


def all_events(store: LineageStore, ns: str = NS) -> list[LineageEvent]:
    events, _ = store.events(ns, limit=10_000)
    return events


def test_changes_appear_in_order_with_their_fields(store: LineageStore, clock: ManualClock) -> None:
    store.record(mem("root"))
    store.record(mem("a", "root"))
    store.record(mem("b", "a"))
    store.record(mem("c", "b"))
    store.record(mem("old", volatility="high"))
    store.record(mem("new"))
    store.record(mem("plan", "old", "new"))
    clock.advance(10)
    revoked = store.revoke(NS, "root", reason="wrong source")
    clock.advance(10)
    store.supersede(NS, "old", "new", reason="user moved")
    clock.advance(10)
    store.confirm(NS, "b", reason="checked")
    store.update(NS, "new", 1, {"value": "Shanghai"}, now=NOW + 31)
    assert revoked.affected == ("a", "b", "c")
    pend = Status.PENDING_VERIFICATION.value
    t1, t2, t3 = NOW + 10, NOW + 20, NOW + 30
    expected = [
        ev("recorded", "root", status="active", version=1),
        ev("recorded", "a", status="active", version=1, affected=("root",)),
        ev("recorded", "b", status="active", version=1, affected=("a",)),
        ev("recorded", "c", status="active", version=1, affected=("b",)),
        ev("recorded", "old", status="active", version=1),
        ev("recorded", "new", status="active", version=1),
        ev("recorded", "plan", status="active", version=1, affected=("old", "new")),
        ev(
            "status_changed",
            "root",
            t1,
            status="revoked",
            previous_status="active",
            reason="wrong source",
            version=2,
        ),
        ev(
            "cascaded",
            "root",
            t1,
            root_id="root",
            status="revoked",
            reason="ancestor revoked: wrong source",
            affected=("a", "b", "c"),
        ),
        ev(
            "status_changed",
            "old",
            t2,
            status="superseded",
            previous_status="active",
            reason="user moved",
            successor="new",
            version=2,
        ),
        ev(
            "cascaded",
            "old",
            t2,
            root_id="old",
            status="superseded",
            reason="ancestor superseded: user moved",
            affected=("plan",),
        ),
        ev(
            "status_changed",
            "b",
            t3,
            status="active",
            previous_status=pend,
            reason="checked",
            version=3,
        ),
        ev("updated", "new", NOW + 31, version=2),
    ]
    events = all_events(store)
    assert normalise(events) == expected
    cursors = [e.cursor for e in events]
    assert len(set(cursors)) == len(cursors)
    assert {e.namespace for e in events} == {NS}
    assert all_events(store, "tenant-e/other") == []


def test_resuming_from_a_cursor_returns_exactly_the_later_events(store: LineageStore) -> None:
    for i in range(5):
        store.record(mem(f"m{i}"))
    everything = all_events(store)
    first, cursor = store.events(NS, limit=2)
    assert first == everything[:2] and cursor == everything[1].cursor
    rest, cursor = store.events(NS, after=cursor)
    assert rest == everything[2:] and cursor == everything[-1].cursor
    assert store.events(NS, after=cursor) == ([], cursor)
    assert store.latest_cursor(NS) == cursor
    store.revoke(NS, "m3")
    later, cursor2 = store.events(NS, after=cursor)
    assert [(e.type, e.memory_id) for e in later] == [("status_changed", "m3")]
    assert cursor2 == later[0].cursor == store.latest_cursor(NS)
    for e in everything:  # every cursor resumes right after its own event
        i = everything.index(e)
        assert store.events(NS, after=e.cursor)[0] == everything[i + 1 :] + later


def test_an_empty_namespace_has_a_start_cursor(store: LineageStore) -> None:
    start = store.latest_cursor(NS)
    assert store.events(NS) == ([], start)
    assert store.events(NS, after=start) == ([], start)
    store.record(mem("m"))
    events, _ = store.events(NS, after=start)
    assert [e.memory_id for e in events] == ["m"]


def test_wait_events_returns_when_another_thread_records(store: LineageStore) -> None:
    store.record(mem("before"))
    cursor = store.latest_cursor(NS)
    result: list[object] = []

    def watch() -> None:
        result.append(store.wait_events(NS, after=cursor, timeout=10.0))

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(0.05)  # let the watcher block
    started = time.monotonic()
    store.record(mem("after"))
    watcher.join(timeout=5.0)
    assert not watcher.is_alive()
    assert time.monotonic() - started < 2.0
    events, new_cursor = result[0]  # type: ignore[misc]
    assert [(e.type, e.memory_id) for e in events] == [("recorded", "after")]
    assert new_cursor == events[0].cursor


def test_wait_events_times_out_empty(store: LineageStore) -> None:
    store.record(mem("m"))
    cursor = store.latest_cursor(NS)
    started = time.monotonic()
    assert store.wait_events(NS, after=cursor, timeout=0.05) == ([], cursor)
    assert 0.04 <= time.monotonic() - started < 2.0
    # Something already there: no wait at all.
    events, _ = store.wait_events(NS, after=None, timeout=0.0)
    assert [e.memory_id for e in events] == ["m"]


def test_failed_changes_emit_no_event(store: LineageStore) -> None:
    store.record(mem("base"))
    store.record(mem("pending", status="pending_verification"))
    cursor = store.latest_cursor(NS)
    with pytest.raises(UnknownDependencyError):
        store.record(mem("m", "base", "ghost"))
    with pytest.raises(TransitionError):
        store.confirm(NS, "base")
    with pytest.raises(VersionConflictError):
        store.revoke(NS, "base", expected_version=7)
    with pytest.raises(VersionConflictError):
        store.update(NS, "base", 5, {"value": "x"})
    with pytest.raises(ValidationError):
        store.record(mem("bad", volatility="Fast!"))
    assert store.events(NS, after=cursor) == ([], cursor)
    assert store.latest_cursor(NS) == cursor


def test_access_and_counters_are_not_lineage_events(store: LineageStore) -> None:
    store.record(mem("m"))
    cursor = store.latest_cursor(NS)
    store.record_access(NS, ["m"])
    store.incr_counter(NS, "tool:x")
    assert store.events(NS, after=cursor) == ([], cursor)


def test_expired_cursor_is_refused(make_store) -> None:  # type: ignore[no-untyped-def]
    store = make_store(limits=StoreLimits(event_retention=10))
    store.record(mem("m0"))
    oldest = store.latest_cursor(NS)
    for i in range(1, 300):  # Redis trims whole stream nodes (MAXLEN ~), so go well past
        store.record(mem(f"m{i}"))
    with pytest.raises(CursorExpiredError) as err:
        store.events(NS, after=oldest)
    assert (err.value.field, err.value.code, err.value.grpc_status) == (
        "cursor",
        "CURSOR_EXPIRED",
        "OUT_OF_RANGE",
    )
    with pytest.raises(CursorExpiredError):
        store.wait_events(NS, after=oldest, timeout=0.01)
    retained, last = store.events(NS, limit=10_000)
    assert 10 <= len(retained) < 300
    assert retained[-1].memory_id == "m299" and last == store.latest_cursor(NS)
    # The oldest retained event's cursor is still good, and so is the newest.
    after_first, _ = store.events(NS, after=retained[0].cursor, limit=10_000)
    assert after_first == retained[1:]
    assert store.events(NS, after=last) == ([], last)


def test_cursor_ahead_of_the_log_is_expired(store: LineageStore) -> None:
    store.record(mem("m"))
    with pytest.raises(CursorExpiredError):
        store.events(NS, after=shifted(store.latest_cursor(NS)))
    with pytest.raises(CursorExpiredError):  # e.g. the store was reset since
        store.events("tenant-e/empty", after=shifted(store.latest_cursor(NS)))


@pytest.mark.parametrize("bad", ["", "not-a-cursor", "1-2-3", "-1", "7" * 60, 7, "\uff11"])
def test_malformed_cursor_is_a_validation_error(store: LineageStore, bad: object) -> None:
    store.record(mem("m"))
    for call in (
        lambda: store.events(NS, after=bad),  # type: ignore[arg-type]
        lambda: store.wait_events(NS, after=bad, timeout=0.0),
    ):  # type: ignore[arg-type]
        with pytest.raises(ValidationError) as err:
            call()
        assert (err.value.field, err.value.code) == ("cursor", "INVALID_CURSOR")


def test_event_reads_validate_their_input(store: LineageStore) -> None:
    for call, field in [
        (lambda: store.events("bad ns"), "namespace"),
        (lambda: store.events(NS, limit=0), "limit"),
        (lambda: store.events(NS, limit=10_001), "limit"),
        (lambda: store.wait_events(NS, after=None, timeout=-1), "timeout"),
        (lambda: store.wait_events(NS, after=None, timeout=7200), "timeout"),
        (lambda: store.latest_cursor("a{b}"), "namespace"),
    ]:
        with pytest.raises(ValidationError) as err:
            call()
        assert err.value.field == field


def test_cascade_affected_lists_exactly_the_remarked_descendants(store: LineageStore) -> None:
    #   root -> a -> c -> e          other -> x (x also depends on b)
    #        -> b -> c, d (archived), x;  a -> gone (evicted)
    for memory_id, deps in [
        ("root", ()),
        ("other", ()),
        ("a", ("root",)),
        ("b", ("root",)),
        ("c", ("a", "b")),
        ("d", ("b",)),
        ("e", ("c",)),
        ("x", ("other", "b")),
        ("gone", ("a",)),
    ]:
        store.record(mem(memory_id, *deps))
    store.set_status(NS, "d", Status.ARCHIVED)
    store.set_status(NS, "gone", Status.EVICTED)
    cursor = store.latest_cursor(NS)
    result = store.revoke(NS, "root")
    assert result.affected == ("a", "b", "c", "d", "x", "e")  # breadth first
    assert (result.marked, result.visited) == (6, 7)
    cascaded = normalise(store.events(NS, after=cursor)[0])[1:]
    assert [(e.type, e.affected) for e in cascaded] == [("cascaded", result.affected)]
    # Nothing left to mark: no cascaded event, empty affected.
    again = store.set_status(NS, "c", Status.REVOKED)
    assert (again.affected, again.marked) == ((), 0)  # e is already pending
    assert store.confirm(NS, "e").status == "active"
    cursor = store.latest_cursor(NS)
    assert store.set_status(NS, "a", Status.REVOKED).affected == ("e",)
    assert [e.type for e in store.events(NS, after=cursor)[0]] == ["status_changed", "cascaded"]
    # A non-cascading change affects nothing.
    assert store.set_status(NS, "other", Status.ARCHIVED).affected == ()


def test_tainted_record_and_dependency_addition_events(store: LineageStore) -> None:
    store.record(mem("bad"))
    store.revoke(NS, "bad", reason="wrong")
    store.record(mem("m"))
    store.record(mem("k", "m"))
    cursor = store.latest_cursor(NS)
    store.record(mem("on-bad", "bad"))
    store.add_dependencies(NS, "m", ["bad"], expected_version=1)
    pend = Status.PENDING_VERIFICATION.value
    assert normalise(store.events(NS, after=cursor)[0]) == [
        ev(
            "recorded",
            "on-bad",
            status=pend,
            version=1,
            affected=("bad",),
            root_id="bad",
            reason="dependency revoked",
        ),
        ev("updated", "m", version=2),
        ev(
            "status_changed",
            "m",
            status=pend,
            previous_status="active",
            root_id="bad",
            reason="dependency revoked",
            version=2,
        ),
        ev(
            "cascaded",
            "m",
            root_id="bad",
            status="revoked",
            reason="dependency revoked",
            affected=("k",),
        ),
    ]


def test_volatility_is_a_class_name(store: LineageStore) -> None:
    for cls in ("high", "medium", "low", "static", "cpu_load_5m"):
        assert store.record(mem(f"m-{cls}", volatility=cls)).volatility == cls
        assert store.get(NS, f"m-{cls}").volatility == cls
    assert store.record(mem("none")).volatility is None
    assert store.update(NS, "m-high", 1, {"volatility": "static"}).volatility == "static"
    assert store.get(NS, "m-high").volatility == "static"
    assert store.update(NS, "m-high", 2, {"volatility": None}).volatility is None
    for bad in (0.5, 3, True, "Fast", "too-fast", "x" * 33, "", "höh"):
        with pytest.raises(ValidationError) as err:
            store.record(mem("bad", volatility=bad))
        assert (err.value.field, err.value.code) == ("volatility", "INVALID_VOLATILITY")
        with pytest.raises(ValidationError) as err:
            store.update(NS, "none", 1, {"volatility": bad})
        assert err.value.field == "volatility"
