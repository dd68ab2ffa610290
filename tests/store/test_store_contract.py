"""The store contract: every test runs on embedded, redis and cluster (see conftest)."""

from __future__ import annotations

import math
from functools import partial

import pytest
from memlineage.lineage import (
    AlreadyExistsError,
    CycleError,
    ManualClock,
    MemoryRecord,
    MemoryRef,
    NamespaceError,
    NotFoundError,
    Status,
    StoreLimits,
    TransitionError,
    UnknownDependencyError,
    ValidationError,
    VersionConflictError,
)
from memlineage.lineage.model import TRANSITIONS
from memlineage.store import LineageStore
from support.memories import NOW, memory

NS = "tenant-a/user:1"
mem = partial(memory, ns=NS)


def chain(store: LineageStore, *ids: str) -> None:
    """Record ids[0] <- ids[1] <- ... (each depends on the previous one)."""
    prev: tuple[str, ...] = ()
    for memory_id in ids:
        store.record(mem(memory_id, *prev))
        prev = (memory_id,)


def assert_absent(store: LineageStore, memory_id: str, ns: str = NS) -> None:
    with pytest.raises(NotFoundError):
        store.get(ns, memory_id)


# -- record and read ------------------------------------------------------------------


def test_record_round_trips_every_field(store: LineageStore) -> None:
    store.record(mem("src:1"))
    full = mem(
        "m:1",
        "src:1",
        type="preference",
        tags=("travel", "city", "travel"),
        subject="user:42",
        attribute="destination_city",
        value='Shanghai, "PVG"\n',
        volatility="medium",
        creator_kind="tool",
        creator_id="tool:flight_api",
        creator_confidence=0.8,
        created_at=NOW - 10.5,
        context_id="ctx:7",
    )
    returned = store.record(full)
    got = store.get(NS, "m:1")
    assert got == returned
    assert got.tags == ("travel", "city")  # duplicates dropped, order kept
    assert (got.type, got.subject, got.attribute, got.value) == (
        "preference",
        "user:42",
        "destination_city",
        'Shanghai, "PVG"\n',
    )
    assert (got.volatility, got.creator_kind, got.creator_id, got.creator_confidence) == (
        "medium",
        "tool",
        "tool:flight_api",
        0.8,
    )
    assert (got.created_at, got.context_id, got.dependencies) == (NOW - 10.5, "ctx:7", ("src:1",))
    assert (got.status, got.version, got.successor, got.access_count, got.last_access) == (
        "active",
        1,
        None,
        0,
        None,
    )
    assert store.get(NS, "src:1").derivations == ("m:1",)


def test_created_at_defaults_to_clock(store: LineageStore, clock: ManualClock) -> None:
    clock.advance(42.0)
    assert store.record(mem("m")).created_at == NOW + 42.0
    assert store.get(NS, "m").created_at == NOW + 42.0


def test_get_many_returns_existing_and_omits_missing(store: LineageStore) -> None:
    for i in range(5):
        store.record(mem(f"m{i}"))
    got = store.get_many(NS, ["m4", "nope", "m0", "m4"])
    assert sorted(got) == ["m0", "m4"]
    assert got["m4"].id == "m4"
    assert store.get_many(NS, []) == {}


def test_namespaces_are_isolated(store: LineageStore) -> None:
    store.record(mem("shared-id", ns="a", value="A"))
    store.record(mem("shared-id", ns="b", value="B"))
    assert store.get("a", "shared-id").value == "A"
    assert store.get("b", "shared-id").value == "B"
    store.record(mem("only-a", ns="a"))
    assert_absent(store, "only-a", ns="b")
    assert store.get_many("b", ["only-a"]) == {}
    # A dependency id that exists only in another namespace is unknown here.
    with pytest.raises(UnknownDependencyError):
        store.record(mem("x", "only-a", ns="b"))
    store.revoke("a", "shared-id")
    assert store.get("b", "shared-id").status == "active"


def test_duplicate_id_is_refused_and_original_kept(store: LineageStore) -> None:
    store.record(mem("m", value="first"))
    with pytest.raises(AlreadyExistsError) as err:
        store.record(mem("m", value="second"))
    assert err.value.field == "id"
    assert store.get(NS, "m").value == "first"


# -- bad input: precise error, nothing written ---------------------------------------------


def test_unknown_dependency_among_three_writes_nothing(store: LineageStore) -> None:
    store.record(mem("d0"))
    store.record(mem("d2"))
    with pytest.raises(UnknownDependencyError) as err:
        store.record(mem("m", "d0", "ghost", "d2", subject="s", attribute="a"))
    assert (err.value.field, err.value.code) == ("dependencies[1]", "UNKNOWN_DEPENDENCY")
    assert_absent(store, "m")
    assert store.get(NS, "d0").derivations == ()
    assert store.get(NS, "d2").derivations == ()
    assert store.current_claim(NS, "s", "a") is None


def test_cross_namespace_dependency_is_refused(store: LineageStore) -> None:
    store.record(mem("theirs", ns="other"))
    store.record(mem("ours"))
    with pytest.raises(NamespaceError) as err:
        store.record(mem("m", "ours", MemoryRef("other", "theirs")))
    assert (err.value.field, err.value.code, err.value.grpc_status) == (
        "dependencies[1]",
        "CROSS_NAMESPACE",
        "PERMISSION_DENIED",
    )
    assert_absent(store, "m")
    assert store.get("other", "theirs").derivations == ()
    assert store.get(NS, "ours").derivations == ()
    # A same-namespace MemoryRef is accepted and stored as a plain id.
    assert store.record(mem("ok", MemoryRef(NS, "ours"))).dependencies == ("ours",)


def test_self_dependency_is_a_cycle(store: LineageStore) -> None:
    with pytest.raises(CycleError) as err:
        store.record(mem("m", "m"))
    assert (err.value.field, err.value.code) == ("dependencies[0]", "SELF_DEPENDENCY")
    assert_absent(store, "m")


def test_dependency_limit(store: LineageStore) -> None:
    for i in range(9):
        store.record(mem(f"d{i}"))
    store.record(mem("eight", *(f"d{i}" for i in range(8))))
    with pytest.raises(ValidationError) as err:
        store.record(mem("nine", *(f"d{i}" for i in range(9))))
    assert (err.value.field, err.value.code) == ("dependencies", "TOO_MANY_DEPENDENCIES")
    assert_absent(store, "nine")
    assert store.get(NS, "d8").derivations == ()


BAD_RECORDS = [
    ("empty id", dict(id=""), "id", "INVALID_ID"),
    ("id with space", dict(id="a b"), "id", "INVALID_ID"),
    ("id with brace", dict(id="a{b}"), "id", "INVALID_ID"),
    ("id too long", dict(id="x" * 129), "id", "ID_TOO_LONG"),
    ("namespace with brace", dict(namespace="{x}"), "namespace", "INVALID_ID"),
    (
        "confidence NaN",
        dict(creator_confidence=math.nan),
        "creator_confidence",
        "INVALID_CONFIDENCE",
    ),
    ("confidence > 1", dict(creator_confidence=1.01), "creator_confidence", "INVALID_CONFIDENCE"),
    ("confidence < 0", dict(creator_confidence=-0.1), "creator_confidence", "INVALID_CONFIDENCE"),
    ("confidence bool", dict(creator_confidence=True), "creator_confidence", "INVALID_CONFIDENCE"),
    (
        "confidence past a float",
        dict(creator_confidence=10**400),
        "creator_confidence",
        "INVALID_CONFIDENCE",
    ),
    ("created far in the future", dict(created_at=NOW + 301), "created_at", "FUTURE_TIMESTAMP"),
    ("created_at infinite", dict(created_at=math.inf), "created_at", "INVALID_TIME"),
    ("created_at past a float", dict(created_at=-(10**400)), "created_at", "INVALID_TIME"),
    ("unknown creator kind", dict(creator_kind="robot"), "creator_kind", "INVALID_CREATOR_KIND"),
    ("creator id missing", dict(creator_id=""), "creator_id", "INVALID_ID"),
    ("too many tags", dict(tags=tuple(f"t{i}" for i in range(65))), "tags", "TOO_MANY_TAGS"),
    ("bad tag", dict(tags=("ok", "not ok")), "tags[1]", "INVALID_ID"),
    ("subject without attribute", dict(subject="user:1"), "attribute", "INCOMPLETE_CLAIM"),
    ("value too long", dict(value="v" * 1025), "value", "VALUE_TOO_LONG"),
    ("numeric volatility", dict(volatility=0.5), "volatility", "INVALID_VOLATILITY"),
    ("volatility class with capitals", dict(volatility="High"), "volatility", "INVALID_VOLATILITY"),
    ("volatility class too long", dict(volatility="v" * 33), "volatility", "INVALID_VOLATILITY"),
    ("empty volatility class", dict(volatility=""), "volatility", "INVALID_VOLATILITY"),
    ("recorded revoked", dict(status="revoked"), "status", "INVALID_INITIAL_STATUS"),
    ("unknown status", dict(status="zombie"), "status", "UNKNOWN_STATUS"),
    ("derivations given", dict(derivations=("x",)), "derivations", "READ_ONLY_FIELD"),
    (
        "duplicate dependency",
        dict(dependencies=("base", "base")),
        "dependencies[1]",
        "DUPLICATE_DEPENDENCY",
    ),
    ("dependency bad id", dict(dependencies=("base", "bad id")), "dependencies[1]", "INVALID_ID"),
]


@pytest.mark.parametrize(
    ("fields", "field", "code"), [b[1:] for b in BAD_RECORDS], ids=[b[0] for b in BAD_RECORDS]
)
def test_bad_record_gets_precise_error_and_writes_nothing(
    store: LineageStore, fields: dict[str, object], field: str, code: str
) -> None:
    store.record(mem("base"))
    values: dict[str, object] = dict(
        id="m", namespace=NS, creator_id="user:alice", dependencies=("base",)
    )
    values.update(fields)
    with pytest.raises(ValidationError) as err:
        store.record(MemoryRecord(**values))  # type: ignore[arg-type]
    assert (err.value.field, err.value.code) == (field, code)
    assert err.value.grpc_status == "INVALID_ARGUMENT"
    assert store.get(NS, "base").derivations == ()
    assert_absent(store, "m")


def test_future_tolerance_boundary(store: LineageStore) -> None:
    assert store.record(mem("ok", created_at=NOW + 300)).created_at == NOW + 300


def test_reads_validate_their_input(store: LineageStore) -> None:
    with pytest.raises(ValidationError) as err:
        store.get("bad ns", "m")
    assert err.value.field == "namespace"
    with pytest.raises(ValidationError) as err:
        store.get_many(NS, ["ok", "no good"])
    assert err.value.field == "ids[1]"
    with pytest.raises(NotFoundError):
        store.get(NS, "missing")


# -- status changes and cascade --------------------------------------------------------------


@pytest.mark.parametrize(
    "source", [s for s in Status if s is not Status.ACTIVE], ids=lambda s: s.value
)
def test_transition_table_is_enforced(
    store: LineageStore, clock: ManualClock, source: Status
) -> None:
    """Reach ``source``, then try every target: allowed ones pass, others are refused."""
    for target in Status:
        memory_id = f"m-{target.value}"
        store.record(mem("succ")) if target is Status.ACTIVE else None
        store.record(mem(memory_id))
        if source is not Status.SUPERSEDED:
            store.set_status(NS, memory_id, source)
        else:
            store.supersede(NS, memory_id, "succ")
        before = store.get(NS, memory_id)
        successor = "succ" if target is Status.SUPERSEDED else None
        if target in TRANSITIONS[source]:
            after = store.set_status(NS, memory_id, target, successor=successor, reason="test").root
            assert (after.status, after.version) == (target.value, before.version + 1)
            assert after.status_history[-1][1:4] == (source.value, target.value, "test")
            assert after == store.get(NS, memory_id)
        else:
            with pytest.raises(TransitionError) as err:
                store.set_status(NS, memory_id, target, successor=successor)
            assert (err.value.current, err.value.requested) == (source.value, target.value)
            assert err.value.grpc_status == "FAILED_PRECONDITION"
            assert store.get(NS, memory_id) == before


def test_status_input_errors(store: LineageStore) -> None:
    store.record(mem("m"))
    with pytest.raises(ValidationError) as err:
        store.set_status(NS, "m", "zombie")
    assert (err.value.field, err.value.code) == ("status", "UNKNOWN_STATUS")
    with pytest.raises(ValidationError) as err:
        store.set_status(NS, "m", Status.SUPERSEDED)
    assert err.value.code == "MISSING_SUCCESSOR"
    with pytest.raises(NotFoundError) as err:
        store.supersede(NS, "m", "ghost")
    assert err.value.field == "successor"
    with pytest.raises(NotFoundError):
        store.revoke(NS, "ghost")
    with pytest.raises(ValidationError) as err:
        store.revoke(NS, "m", reason="line\nbreak")
    assert err.value.field == "reason"
    assert store.get(NS, "m").status == "active"
    assert store.get(NS, "m").version == 1


def test_revoke_cascades_to_every_descendant_only(store: LineageStore, clock: ManualClock) -> None:
    #   root -> a -> c -> e          other -> x
    #        -> b -> c (diamond)             (x also depends on b)
    #             -> d (archived)
    store.record(mem("root"))
    store.record(mem("other"))
    store.record(mem("a", "root"))
    store.record(mem("b", "root"))
    store.record(mem("c", "a", "b"))
    store.record(mem("d", "b"))
    store.record(mem("e", "c"))
    store.record(mem("x", "other", "b"))
    store.record(mem("gone", "a"))
    store.set_status(NS, "d", Status.ARCHIVED)
    store.set_status(NS, "gone", Status.EVICTED)
    clock.advance(60)
    result = store.revoke(NS, "root", reason="user withdrew it")
    assert result.root.status == "revoked"
    assert result.root == store.get(NS, "root")
    assert result.root.derivations == ("a", "b")
    assert result.visited == 7  # a b c d e x gone (c reached twice, counted once)
    assert result.marked == 6  # all but the evicted one
    for memory_id in ("a", "b", "c", "d", "e", "x"):
        rec = store.get(NS, memory_id)
        assert rec.status == "pending_verification", memory_id
        last = rec.status_history[-1]
        assert last.root_id == "root"
        assert last.at == NOW + 60
        assert last.reason == "ancestor revoked: user withdrew it"
        assert last.to_status == "pending_verification"
    assert store.get(NS, "d").status_history[-1].from_status == "archived"
    assert store.get(NS, "c").version == 2  # marked once despite the diamond
    assert store.get(NS, "gone").status == "evicted"
    assert store.get(NS, "other").status == "active"
    assert store.get(NS, "other").version == 1


def test_supersede_links_successor_and_cascades(store: LineageStore) -> None:
    store.record(mem("old", subject="user:42", attribute="city", value="Paris"))
    store.record(mem("plan", "old"))
    store.record(mem("new", subject="user:42", attribute="city", value="Shanghai"))
    assert store.current_claim(NS, "user:42", "city").id == "new"  # type: ignore[union-attr]
    result = store.supersede(NS, "old", "new", reason="user moved")
    assert (result.root.status, result.root.successor) == ("superseded", "new")
    assert store.get(NS, "plan").status == "pending_verification"
    assert store.get(NS, "new").status == "active"
    assert store.current_claim(NS, "user:42", "city").id == "new"  # type: ignore[union-attr]


def test_a_compressed_claim_holder_is_superseded_by_a_new_value(store: LineageStore) -> None:
    """The sweep compresses memories on its own: a compressed holder of a claim must
    not block every later value of it (before: "cannot go from compressed to
    superseded", on every backend)."""
    store.record(mem("old", subject="user:42", attribute="city", value="Paris"))
    store.record(mem("summary", "old"))
    store.set_status(NS, "old", Status.COMPRESSED, reason="summarised into summary")
    outcome = store.record_claim(
        mem("new", subject="user:42", attribute="city", value="Rome"), supersede="old"
    )
    assert outcome.superseded_id == "old" and outcome.affected == ("summary",)
    assert (store.get(NS, "old").status, store.get(NS, "old").successor) == ("superseded", "new")
    assert store.current_claim(NS, "user:42", "city").id == "new"  # type: ignore[union-attr]


def test_current_claim_follows_latest_and_is_released_on_revoke(store: LineageStore) -> None:
    assert store.current_claim(NS, "user:42", "city") is None
    store.record(mem("m1", subject="user:42", attribute="city", value="Paris"))
    store.record(mem("m2", subject="user:42", attribute="city", value="Lyon"))
    store.record(mem("other", subject="user:42", attribute="airline", value="AF"))
    current = store.current_claim(NS, "user:42", "city")
    assert current is not None and (current.id, current.value) == ("m2", "Lyon")
    store.revoke(NS, "m1")  # not the holder: nothing changes
    assert store.current_claim(NS, "user:42", "city").id == "m2"  # type: ignore[union-attr]
    store.revoke(NS, "m2")
    assert store.current_claim(NS, "user:42", "city") is None
    assert store.current_claim(NS, "user:42", "airline").id == "other"  # type: ignore[union-attr]
    assert store.current_claim("elsewhere", "user:42", "airline") is None


def test_confirm_only_from_pending(store: LineageStore) -> None:
    chain(store, "root", "child")
    store.revoke(NS, "root")
    confirmed = store.confirm(NS, "child", reason="re-checked with the user")
    assert (confirmed.status, confirmed.version) == ("active", 3)
    assert confirmed.status_history[-1][1:4] == (
        "pending_verification",
        "active",
        "re-checked with the user",
    )
    with pytest.raises(TransitionError):
        store.confirm(NS, "child")
    store.set_status(NS, "child", Status.ARCHIVED)
    with pytest.raises(TransitionError):  # archived -> active is allowed, but not as confirm
        store.confirm(NS, "child")


def test_record_on_tainted_dependency_starts_pending(store: LineageStore) -> None:
    chain(store, "root", "mid")
    store.revoke(NS, "root", reason="bad")
    rec = store.record(mem("late", "mid"))
    assert rec.status == "pending_verification"
    assert store.get(NS, "late").status == "pending_verification"
    last = store.get(NS, "late").status_history[-1]
    assert (last.from_status, last.to_status, last.root_id) == (
        "active",
        "pending_verification",
        "mid",
    )
    store.record(mem("fine"))
    assert store.record(mem("ok", "fine")).status == "active"


def test_history_is_capped(store: LineageStore) -> None:
    store.record(mem("m"))
    store.record(mem("kid", "m"))
    archived = store.set_status(NS, "m", Status.ARCHIVED).root
    assert archived == store.get(NS, "m") and archived.derivations == ("kid",)
    store.set_status(NS, "m", Status.ACTIVE)
    for _ in range(3):
        store.set_status(NS, "m", Status.ARCHIVED)
        store.set_status(NS, "m", Status.ACTIVE)
    history = store.get(NS, "m").status_history
    assert len(history) == 4  # LIMITS.history_length in conftest (8 changes made)
    assert history[-1][1:3] == ("archived", "active")


# -- compare-and-set -----------------------------------------------------------------------


def test_update_is_compare_and_set(store: LineageStore) -> None:
    store.record(mem("m", tags=("a",), value="1"))
    updated = store.update(NS, "m", 1, {"value": "2", "tags": ["b", "c"], "volatility": "low"})
    assert (updated.value, updated.tags, updated.volatility, updated.version) == (
        "2",
        ("b", "c"),
        "low",
        2,
    )
    with pytest.raises(VersionConflictError) as err:
        store.update(NS, "m", 1, {"value": "stale"})
    assert (err.value.expected, err.value.actual, err.value.code) == (1, 2, "VERSION_CONFLICT")
    assert store.get(NS, "m") == updated
    store.record(mem("child", "m"))
    assert store.update(NS, "m", 2, {"type": "decision"}).derivations == ("child",)
    cleared = store.update(NS, "m", 3, {"value": None, "tags": []})
    assert (cleared.value, cleared.tags, cleared.version) == (None, (), 4)
    assert store.get(NS, "m") == cleared


def test_update_refuses_lineage_fields_and_bad_values(store: LineageStore) -> None:
    store.record(mem("m"))
    for changes, field in [
        ({"dependencies": ["x"]}, "dependencies"),
        ({"status": "revoked"}, "status"),
        ({"creator_confidence": 2.0}, "creator_confidence"),
        ({"volatility": 3.5}, "volatility"),
        ({"volatility": "not a class"}, "volatility"),
        ({}, "changes"),
    ]:
        with pytest.raises(ValidationError) as err:
            store.update(NS, "m", 1, changes)
        assert err.value.field == field
    with pytest.raises(NotFoundError):
        store.update(NS, "ghost", 1, {"value": "x"})
    assert store.get(NS, "m").version == 1


def test_status_change_with_stale_version_is_refused(store: LineageStore) -> None:
    store.record(mem("m"))
    store.update(NS, "m", 1, {"value": "x"})
    with pytest.raises(VersionConflictError):
        store.revoke(NS, "m", expected_version=1)
    assert store.get(NS, "m").status == "active"
    assert store.revoke(NS, "m", expected_version=2).root.version == 3


def test_cascade_bumps_versions_so_stale_writers_lose(store: LineageStore) -> None:
    chain(store, "root", "child")
    seen = store.get(NS, "child")
    store.revoke(NS, "root")
    with pytest.raises(VersionConflictError):
        store.update(NS, "child", seen.version, {"value": "based on stale read"})


# -- traversals ------------------------------------------------------------------------------


def test_ancestors_and_descendants_with_limits(store: LineageStore) -> None:
    chain(store, "a0", "a1", "a2", "a3", "a4")
    store.record(mem("side"))
    store.record(mem("b", "a4", "side"))
    up = store.ancestors(NS, "b", max_depth=2)
    assert [r.id for r in up.records] == ["a4", "side", "a3"]
    assert up.depths == {"a4": 1, "side": 1, "a3": 2}
    assert up.truncated
    full = store.ancestors(NS, "b", max_depth=10)
    assert [r.id for r in full.records] == ["a4", "side", "a3", "a2", "a1", "a0"]
    assert not full.truncated
    limited = store.ancestors(NS, "b", max_depth=10, limit=3)
    assert len(limited.records) == 3 and limited.truncated
    down = store.descendants(NS, "a2", max_depth=10)
    assert [r.id for r in down.records] == ["a3", "a4", "b"]
    assert down.depths["b"] == 3
    assert store.descendants(NS, "b").records == ()
    with pytest.raises(NotFoundError):
        store.ancestors(NS, "ghost")
    with pytest.raises(ValidationError) as err:
        store.ancestors(NS, "b", max_depth=-1)
    assert err.value.field == "max_depth"


def test_lineage_view_batches_ancestors_and_descendants(store: LineageStore) -> None:
    chain(store, "r", "p", "q")
    store.record(mem("k", "q"))
    store.record(mem("unrelated"))
    view = store.lineage_view(NS, ["q", "ghost"], ancestor_depth=1, descendant_depth=1)
    assert sorted(view.records) == ["k", "p", "q"]
    assert view.missing == ("ghost",)
    full = store.lineage_view(NS, ["q"], ancestor_depth=5)
    assert sorted(full.records) == ["p", "q", "r"]
    assert full.records["r"].derivations == ("p",)
    capped = store.lineage_view(NS, ["q"], ancestor_depth=5, descendant_depth=5, limit=1)
    assert len(capped.records) == 2 and capped.truncated


# -- access statistics and counters -------------------------------------------------------


def test_record_access_counts_and_keeps_latest_time(store: LineageStore) -> None:
    store.record(mem("m1"))
    store.record(mem("m2"))
    assert store.record_access(NS, ["m1", "m2", "ghost"], now=NOW + 10) == 2
    assert store.record_access(NS, ["m1"], now=NOW + 5) == 1  # late report: time kept
    m1, m2 = store.get(NS, "m1"), store.get(NS, "m2")
    assert (m1.access_count, m1.last_access, m1.version) == (2, NOW + 10, 1)
    assert (m2.access_count, m2.last_access) == (1, NOW + 10)
    assert_absent(store, "ghost")
    assert store.record_access("other", ["m1"]) == 0


def test_sliding_window_counter(store: LineageStore, clock: ManualClock) -> None:
    for offset in (0, 100, 3599, 3600, 7000):
        store.incr_counter(NS, "tool:flight_api", now=NOW + offset)
    store.incr_counter("other", "tool:flight_api", now=NOW)
    at = NOW + 7000
    assert store.count(NS, "tool:flight_api", 3600, now=at) == 3  # (3400, 7000]
    assert store.count(NS, "tool:flight_api", 3400, now=at) == 1  # lower bound excluded
    assert store.count(NS, "tool:flight_api", 3401, now=at) == 2
    assert store.count(NS, "tool:flight_api", 86400, now=at) == 5
    assert store.count(NS, "tool:flight_api", 86400, now=NOW + 100) == 2
    assert store.count(NS, "never", 60, now=at) == 0
    clock.set(at)
    assert store.count(NS, "tool:flight_api", 3600) == 3
    with pytest.raises(ValidationError) as err:
        store.count(NS, "tool:flight_api", 0)
    assert err.value.field == "window_seconds"
    # With the instant the count next changes (the oldest event leaves, or a later one
    # enters); an event added moves the write counter (see test_write_counters).
    count, until = store.count_until(NS, "tool:flight_api", 3600, now=NOW + 3500)
    assert count == 2  # NOW and NOW + 100
    assert until == NOW + 3599  # NOW + 3599 enters before NOW leaves (NOW + 3600)
    count, until = store.count_until(NS, "tool:flight_api", 60, now=NOW + 3599.5)
    assert count == 1 and until == NOW + 3600
    count, until = store.count_until(NS, "tool:flight_api", 3600, now=NOW + 3700)
    assert count == 2 and until == NOW + 7000  # (100, 3700]: 3599 leaves at 7199, 7000 enters
    assert store.count_until(NS, "never", 60, now=at) == (0, math.inf)


def test_a_counter_named_after_the_longest_creator_id_counts(store: LineageStore) -> None:
    """The engine names a creator's counter `calls:<creator id>`: a creator id at the
    id limit (128) must be countable, by a Record and by incr_counter, on every
    backend (before: the embedded store refused the Record, "name: is 134 characters
    long", a field the caller never sent; an outside audit)."""
    creator = "tool:" + "t" * 123
    counter = "calls:" + creator
    rec = mem("long", creator_id=creator)
    store.record_claim(rec, now=NOW, count=counter)
    store.incr_counter(NS, counter, now=NOW + 1)
    assert store.count(NS, counter, 60, now=NOW + 1) == 2
    with pytest.raises(ValidationError) as err:
        store.incr_counter(NS, "c" * 145, now=NOW)
    assert err.value.field == "name"


def test_counter_drops_events_past_retention(make_store) -> None:  # type: ignore[no-untyped-def]
    store = make_store(limits=StoreLimits(counter_retention_seconds=100.0))
    store.incr_counter(NS, "c", now=NOW)
    store.incr_counter(NS, "c", now=NOW + 150)
    assert store.count(NS, "c", 100, now=NOW + 150) == 1
    with pytest.raises(ValidationError):
        store.count(NS, "c", 101, now=NOW + 150)


# -- adding dependencies (the only way to attempt a cycle) -----------------------------------


def test_add_dependencies_links_both_ways(store: LineageStore) -> None:
    store.record(mem("a"))
    store.record(mem("b"))
    store.record(mem("m", "a"))
    added = store.add_dependencies(NS, "m", ["b"], expected_version=1)
    assert (added.dependencies, added.version) == (("a", "b"), 2)
    assert added == store.get(NS, "m")
    assert store.get(NS, "b").derivations == ("m",)
    with pytest.raises(VersionConflictError):
        store.add_dependencies(NS, "m", ["a"], expected_version=1)


def test_add_dependency_that_closes_a_cycle_is_refused(store: LineageStore) -> None:
    chain(store, "a", "b", "c", "d")  # a <- b <- c <- d
    store.record(mem("free"))
    for memory_id, deps, field in [
        ("a", ["free", "d"], "dependencies[1]"),
        ("b", ["c"], "dependencies[0]"),
    ]:
        version = store.get(NS, memory_id).version
        with pytest.raises(CycleError) as err:
            store.add_dependencies(NS, memory_id, deps, expected_version=version)
        assert (err.value.field, err.value.code) == (field, "CYCLE")
        assert store.get(NS, memory_id).dependencies == (() if memory_id == "a" else ("a",))
    assert store.get(NS, "free").derivations == ()
    assert store.get(NS, "d").derivations == ()
    # A diamond is not a cycle.
    assert store.add_dependencies(NS, "d", ["a"], expected_version=1).dependencies == ("c", "a")


def test_add_dependencies_input_errors_write_nothing(store: LineageStore) -> None:
    store.record(mem("a"))
    store.record(mem("b"))
    store.record(mem("m", "a"))
    cases = [
        (["m"], CycleError, "dependencies[0]", "SELF_DEPENDENCY"),
        (["a"], ValidationError, "dependencies[0]", "DUPLICATE_DEPENDENCY"),
        (["b", "ghost"], UnknownDependencyError, "dependencies[1]", "UNKNOWN_DEPENDENCY"),
        ([MemoryRef("x", "b")], NamespaceError, "dependencies[0]", "CROSS_NAMESPACE"),
        ([f"d{i}" for i in range(8)], ValidationError, "dependencies", "TOO_MANY_DEPENDENCIES"),
        ([], ValidationError, "dependencies", "EMPTY_UPDATE"),
    ]
    for deps, error, field, code in cases:
        with pytest.raises(error) as err:
            store.add_dependencies(NS, "m", deps, expected_version=1)
        assert (err.value.field, err.value.code) == (field, code)
    assert store.get(NS, "m").version == 1
    assert store.get(NS, "b").derivations == ()
    with pytest.raises(NotFoundError):
        store.add_dependencies(NS, "ghost", ["a"], expected_version=1)


def test_adding_a_tainted_dependency_marks_memory_and_descendants(store: LineageStore) -> None:
    store.record(mem("bad"))
    store.revoke(NS, "bad", reason="wrong")
    chain(store, "m", "below")
    added = store.add_dependencies(NS, "m", ["bad"], expected_version=1)
    assert added.status == "pending_verification"
    assert added.status_history[-1][1:] == (
        "active",
        "pending_verification",
        "dependency revoked",
        "bad",
    )
    below = store.get(NS, "below")
    assert below.status == "pending_verification"
    assert below.status_history[-1].root_id == "bad"


# -- write counters (decision reuse) ----------------------------------------------------


def test_write_counters(make_store) -> None:  # type: ignore[no-untyped-def]
    """Every write to a namespace moves its write counter, access statistics its
    access counter, the review schedule neither; refusals and writes of nothing leave
    both alone. Over Redis the counters are per namespace and shared by every store
    object on the database (other sidecars)."""
    store = make_store()
    # Over Redis, writes through a second store object (another sidecar); the embedded
    # store is its process's only writer.
    other = store if store.kind == "embedded" else make_store()
    ns = NS
    counters = store.epochs(ns)
    assert counters is not None

    def moved(write, which: int = 0) -> None:
        before = store.epochs(ns)
        write()
        after = store.epochs(ns)
        assert after[which] != before[which], write  # type: ignore[index]
        assert after[1 - which] == before[1 - which], write  # type: ignore[index]

    def still(write) -> None:
        before = store.epochs(ns)
        with pytest.raises(Exception):  # noqa: B017 - any refusal
            write()
        assert store.epochs(ns) == before, write

    def unmoved(write) -> None:
        before = store.epochs(ns)
        write()
        assert store.epochs(ns) == before, write

    moved(lambda: other.record(mem("a")))
    moved(lambda: other.record(mem("b", "a", subject="u", attribute="city", value="X")))
    moved(lambda: other.record(mem("c", "b")))
    moved(lambda: other.record(mem("b2", subject="u", attribute="city", value="Y")))
    still(lambda: other.record(mem("a")))  # exists
    still(lambda: other.record(mem("d", "ghost")))  # unknown dependency
    moved(lambda: other.update(ns, "c", 1, {"tags": ("x",)}))
    still(lambda: other.update(ns, "c", 1, {"tags": ("y",)}))  # version conflict
    moved(lambda: other.add_dependencies(ns, "c", ["b2"], expected_version=2))
    moved(lambda: other.feedback(ns, ["a"], success=False))
    unmoved(lambda: other.feedback(ns, ["ghost"], success=True))
    moved(lambda: other.incr_counter(ns, "tool:x"))
    moved(lambda: other.record_access(ns, ["a", "b"]), which=1)
    unmoved(lambda: other.record_access(ns, ["ghost"]))
    unmoved(lambda: other.schedule_review(ns, {"a": NOW + 3600}))
    unmoved(lambda: other.unschedule_review(ns, ["a"]))
    moved(lambda: other.revoke(ns, "a", reason="wrong"))  # cascades to b and c
    still(lambda: other.revoke(ns, "a"))  # already revoked
    moved(lambda: other.confirm(ns, "b"))
    if store.kind != "embedded":  # one counter per namespace (embedded: one per store)
        unmoved(lambda: other.record(mem("z", ns="other-ns")))
