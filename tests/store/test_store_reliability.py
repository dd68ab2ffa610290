"""Reliability and lifecycle support (issue 5), on every backend: claim groups with
confirmations/contradictions, source statistics, usage feedback, the review schedule
and the namespace registry."""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace

import pytest
from memlineage.lineage import (
    ManualClock,
    MemoryRecord,
    Status,
    StoreLimits,
    UnknownDependencyError,
    ValidationError,
)
from memlineage.store import LineageStore
from support.memories import NOW

NS = "tenant-r/user:5"


def claim(
    memory_id: str,
    source: str,
    value: str | None,
    *deps: str,
    ns: str = NS,
    subject: str = "job:7",
    attribute: str = "state",
    **kw: object,
) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        namespace=ns,
        creator_id=source,
        subject=subject,
        attribute=attribute,
        value=value,
        dependencies=deps,
        **kw,
    )  # type: ignore[arg-type]


def marks(store: LineageStore, *ids: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    got = store.get_many(NS, ids)
    return {i: (got[i].confirmed_by, got[i].contradicted_by) for i in ids}


# -- claim groups: confirmations and contradictions ---------------------------------------


def test_three_sources_confirm_and_contradict(store: LineageStore) -> None:
    a = store.record(claim("a", "agent:A", "done"))
    b = store.record(claim("b", "agent:B", "failed"))
    c = store.record(claim("c", "agent:C", "failed"))
    # What record returns already carries the new memory's own marks.
    assert (a.confirmed_by, a.contradicted_by) == ((), ())
    assert (b.confirmed_by, b.contradicted_by) == ((), ("agent:A",))
    assert (c.confirmed_by, c.contradicted_by) == (("agent:B",), ("agent:A",))
    assert c == store.get(NS, "c")
    assert marks(store, "a", "b", "c") == {
        "a": ((), ("agent:B", "agent:C")),
        "b": (("agent:C",), ("agent:A",)),
        "c": (("agent:B",), ("agent:A",)),
    }
    assert store.source_stats(NS, ["agent:A", "agent:B", "agent:C", "agent:Z"]) == {
        "agent:A": (0.0, 2.0),
        "agent:B": (1.0, 1.0),
        "agent:C": (1.0, 1.0),
        "agent:Z": (0.0, 0.0),
    }
    # Bookkeeping: no version bump on anyone, one "recorded" event per memory only.
    assert [r.version for r in store.get_many(NS, ["a", "b", "c"]).values()] == [1, 1, 1]
    events, _ = store.events(NS)
    assert [(e.type, e.memory_id) for e in events] == [
        ("recorded", "a"),
        ("recorded", "b"),
        ("recorded", "c"),
    ]


def test_same_source_restatement_changes_nothing(store: LineageStore) -> None:
    store.record(claim("a1", "agent:A", "done"))
    store.record(claim("a2", "agent:A", "done"))
    store.record(claim("a3", "agent:A", "failed"))
    assert marks(store, "a1", "a2", "a3") == {i: ((), ()) for i in ("a1", "a2", "a3")}
    assert store.source_stats(NS, ["agent:A"]) == {"agent:A": (0.0, 0.0)}


def test_only_active_and_pending_members_count(store: LineageStore) -> None:
    store.record(claim("revoked", "agent:R", "x"))
    store.revoke(NS, "revoked")
    store.record(claim("old", "agent:S", "y"))
    store.record(claim("new", "agent:S", "z"))
    store.supersede(NS, "old", "new")
    store.record(claim("archived", "agent:T", "x"))
    store.set_status(NS, "archived", Status.ARCHIVED)
    store.record(MemoryRecord(id="base", namespace=NS, creator_id="user:u"))
    store.record(claim("pending", "agent:P", "x", "base"))
    store.revoke(NS, "base")  # cascades: "pending" is now pending_verification
    assert store.get(NS, "pending").status == Status.PENDING_VERIFICATION
    before = marks(store, "revoked", "old", "archived")
    out = store.record(claim("probe", "agent:Q", "x"))
    assert (out.confirmed_by, out.contradicted_by) == (("agent:P",), ("agent:S",))
    assert marks(store, "revoked", "old", "archived") == before
    # "archived" and "pending" met "new" when they were recorded (both then live).
    assert marks(store, "new", "pending") == {
        "new": ((), ("agent:T", "agent:P", "agent:Q")),
        "pending": (("agent:Q",), ("agent:S",)),
    }
    assert store.source_stats(NS, ["agent:R", "agent:T", "agent:S", "agent:P", "agent:Q"]) == {
        "agent:R": (0.0, 0.0),
        "agent:T": (0.0, 1.0),
        "agent:S": (0.0, 3.0),
        "agent:P": (1.0, 1.0),
        "agent:Q": (1.0, 1.0),
    }


def test_sources_are_listed_once_but_counted_per_pair(store: LineageStore) -> None:
    store.record(claim("a", "agent:A", "done"))
    store.record(claim("b1", "agent:B", "failed"))
    store.record(claim("b2", "agent:B", "failed"))  # B restates: B's own b1 is left alone
    assert marks(store, "a", "b1", "b2") == {
        "a": ((), ("agent:B",)),
        "b1": ((), ("agent:A",)),
        "b2": ((), ("agent:A",)),
    }
    # One bad per contradicting pair: (a, b1) and (a, b2).
    assert store.source_stats(NS, ["agent:A", "agent:B"]) == {
        "agent:A": (0.0, 2.0),
        "agent:B": (0.0, 2.0),
    }


def test_claims_without_value_confirm_each_other(store: LineageStore) -> None:
    store.record(claim("a", "agent:A", None))
    store.record(claim("b", "agent:B", None))
    store.record(claim("c", "agent:C", ""))  # empty string is a value, not "no value"
    assert marks(store, "a", "b", "c") == {
        "a": (("agent:B",), ("agent:C",)),
        "b": (("agent:A",), ("agent:C",)),
        "c": ((), ("agent:A", "agent:B")),
    }


def test_groups_are_per_claim_and_namespace(store: LineageStore) -> None:
    store.record(claim("a", "agent:A", "done"))
    store.record(claim("b", "agent:B", "failed", attribute="owner"))
    store.record(claim("c", "agent:C", "failed", ns="other:ns"))
    store.record(MemoryRecord(id="plain", namespace=NS, creator_id="agent:D", value="failed"))
    assert marks(store, "a", "b", "plain") == {i: ((), ()) for i in ("a", "b", "plain")}
    assert [r.id for r in store.claim_group(NS, "job:7", "state")] == ["a"]
    assert [r.id for r in store.claim_group("other:ns", "job:7", "state")] == ["c"]
    assert store.claim_group(NS, "job:7", "nothing") == []
    assert store.claim_group("nobody", "job:7", "state") == []


def test_claim_group_keeps_every_member_in_time_order(
    store: LineageStore, clock: ManualClock
) -> None:
    store.record(claim("z-first", "agent:A", "1"))
    clock.advance(1)
    store.record(claim("a-second", "agent:B", "2"))
    store.record(claim("b-second", "agent:C", "2"))
    store.revoke(NS, "z-first")
    group = store.claim_group(NS, "job:7", "state")
    assert [r.id for r in group] == ["z-first", "a-second", "b-second"]
    assert group[0].status == Status.REVOKED
    assert group == [store.get(NS, r.id) for r in group]
    with pytest.raises(ValidationError):
        store.claim_group(NS, "bad subject", "state")


def test_a_failed_record_changes_no_member_and_no_stats(store: LineageStore) -> None:
    store.record(claim("a", "agent:A", "done"))
    store.record(claim("b", "agent:B", "done"))
    before = (
        store.get_many(NS, ["a", "b"]),
        store.source_stats(NS, ["agent:A", "agent:B", "agent:C"]),
    )
    events_before = store.events(NS)
    with pytest.raises(UnknownDependencyError):
        store.record(claim("c", "agent:C", "failed", "ghost"))
    assert (
        store.get_many(NS, ["a", "b"]),
        store.source_stats(NS, ["agent:A", "agent:B", "agent:C"]),
    ) == before
    assert [r.id for r in store.claim_group(NS, "job:7", "state")] == ["a", "b"]
    assert store.events(NS) == events_before
    assert "c" not in store.due_for_review(NS, now=NOW + 10**6)


def test_recorded_memories_cannot_bring_their_own_marks(store: LineageStore) -> None:
    for name in ("confirmed_by", "contradicted_by"):
        with pytest.raises(ValidationError) as err:
            store.record(claim("a", "agent:A", "v", **{name: ("agent:X",)}))
        assert err.value.field == name
    out = store.record(claim("a", "agent:A", "v", uses_ok=5, uses_failed=2, reviewed_at=NOW))
    assert (out.uses_ok, out.uses_failed, out.reviewed_at) == (0, 0, None)
    assert store.get(NS, "a") == out


def test_concurrent_claims_are_compared_pairwise_exactly_once(make_store) -> None:  # type: ignore[no-untyped-def]
    """Many writers on one claim group: every pair of live memories from different
    sources is compared exactly once (Redis retries when the group changed under it)."""
    store = make_store()
    writers, per_writer = 6, 5
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            barrier.wait()
            for n in range(per_writer):
                store.record(claim(f"w{w}-{n}", f"agent:{w}", str((w + n) % 2)))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    group = store.claim_group(NS, "job:7", "state")
    assert len(group) == writers * per_writer
    ok = dict.fromkeys((f"agent:{w}" for w in range(writers)), 0)
    bad = dict(ok)
    for x, y in itertools.combinations(group, 2):
        if x.creator_id == y.creator_id:
            continue
        same = x.value == y.value
        for p, q in ((x, y), (y, x)):
            assert q.creator_id in (p.confirmed_by if same else p.contradicted_by)
            (ok if same else bad)[p.creator_id] += 1
    for r in group:
        assert len(set(r.confirmed_by)) == len(r.confirmed_by)
        assert r.creator_id not in r.confirmed_by + r.contradicted_by
    stats = store.source_stats(NS, list(ok))
    assert stats == {s: (float(ok[s]), float(bad[s])) for s in ok}


# -- source statistics and usage feedback -----------------------------------------------


def test_feedback_counts_uses_and_creator_stats(store: LineageStore) -> None:
    store.record(MemoryRecord(id="t1", namespace=NS, creator_id="tool:api"))
    store.record(MemoryRecord(id="t2", namespace=NS, creator_id="tool:api"))
    store.record(MemoryRecord(id="u1", namespace=NS, creator_id="user:u"))
    cursor = store.latest_cursor(NS)
    assert store.feedback(NS, ["t1", "t2", "u1", "ghost"], True, now=NOW + 1) == 3
    assert store.feedback(NS, ["t1", "t1"], False) == 1  # duplicates count once
    assert store.feedback(NS, ["ghost"], False) == 0
    assert store.feedback(NS, [], True) == 0
    assert store.feedback("empty:ns", ["t1"], True) == 0
    got = store.get_many(NS, ["t1", "t2", "u1"])
    assert {i: (r.uses_ok, r.uses_failed, r.version) for i, r in got.items()} == {
        "t1": (1, 1, 1),
        "t2": (1, 0, 1),
        "u1": (1, 0, 1),
    }
    assert store.source_stats(NS, ["tool:api", "user:u"]) == {
        "tool:api": (2.0, 1.0),
        "user:u": (1.0, 0.0),
    }
    assert store.events(NS, after=cursor) == ([], cursor)  # feedback emits no event


def test_feedback_and_claims_share_the_source_stats(store: LineageStore) -> None:
    store.record(claim("a", "agent:A", "done"))
    store.record(claim("b", "agent:B", "failed"))
    store.feedback(NS, ["a"], True)
    store.feedback(NS, ["b"], False)
    assert store.source_stats(NS, ["agent:A", "agent:B"]) == {
        "agent:A": (1.0, 1.0),
        "agent:B": (0.0, 2.0),
    }
    assert store.source_stats("other:ns", ["agent:A"]) == {"agent:A": (0.0, 0.0)}


def test_feedback_and_stats_validate_input(store: LineageStore) -> None:
    with pytest.raises(ValidationError):
        store.feedback(NS, "t1", True)
    with pytest.raises(ValidationError) as err:
        store.feedback(NS, ["t1"], 1)  # type: ignore[arg-type]
    assert err.value.field == "success"
    with pytest.raises(ValidationError):
        store.source_stats(NS, "agent:A")
    with pytest.raises(ValidationError) as err:
        store.source_stats(NS, ["agent:A", "bad source"])
    assert err.value.field == "sources[1]"
    assert store.source_stats(NS, []) == {}


# -- review schedule ------------------------------------------------------------------------


def test_record_schedules_the_first_review(make_store, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    store = make_store(limits=StoreLimits(first_review_seconds=100.0))
    store.record(MemoryRecord(id="m1", namespace=NS, creator_id="user:u"))
    clock.advance(10)
    store.record(MemoryRecord(id="m2", namespace=NS, creator_id="user:u"))
    store.record(MemoryRecord(id="m0", namespace=NS, creator_id="user:u"), now=NOW + 10)
    assert store.due_for_review(NS, now=NOW + 99.9) == []
    assert store.due_for_review(NS, now=NOW + 100) == ["m1"]
    # Earliest first, ties by id.
    assert store.due_for_review(NS, now=NOW + 110) == ["m1", "m0", "m2"]
    assert store.due_for_review(NS, now=NOW + 110, limit=2) == ["m1", "m0"]
    assert store.due_for_review(NS, now=NOW + 110, limit=0) == []
    clock.advance(1000)
    assert store.due_for_review(NS) == ["m1", "m0", "m2"]  # now defaults to the clock
    assert store.due_for_review("empty:ns", now=NOW + 10**6) == []


def test_reschedule_and_unschedule(store: LineageStore) -> None:
    for i in range(5):
        store.record(MemoryRecord(id=f"m{i}", namespace=NS, creator_id="user:u"))
    first = NOW + store.limits.first_review_seconds
    assert store.due_for_review(NS, now=first) == ["m0", "m1", "m2", "m3", "m4"]
    # The sweep reviewed m0..m2: m0, m1 cold (much later), m2 hot (soon); ghosts ignored.
    n = store.schedule_review(
        NS, {"m0": first + 5000, "m1": first + 5000, "m2": first + 1, "ghost": first}, now=first
    )
    assert n == 3
    got = store.get_many(NS, ["m0", "m2", "m3"])
    assert (got["m0"].reviewed_at, got["m2"].reviewed_at, got["m3"].reviewed_at) == (
        first,
        first,
        None,
    )
    assert {r.version for r in got.values()} == {1}
    assert store.due_for_review(NS, now=first) == ["m3", "m4"]
    assert store.due_for_review(NS, now=first + 1) == ["m3", "m4", "m2"]
    # Moving back and forth leaves exactly one live entry per id.
    store.schedule_review(NS, {"m3": first + 9000}, now=first)
    store.schedule_review(NS, {"m3": first}, now=first)
    store.schedule_review(NS, {"m3": first}, now=first)
    assert store.due_for_review(NS, now=first + 1) == ["m3", "m4", "m2"]
    assert store.unschedule_review(NS, ["m3", "m4", "ghost"]) == 2
    assert store.unschedule_review(NS, ["m3"]) == 0
    assert store.due_for_review(NS, now=first + 10**6) == ["m2", "m0", "m1"]
    assert store.schedule_review(NS, {"m4": first - 1}, now=first) == 1  # back on it
    assert store.due_for_review(NS, now=first) == ["m4"]
    assert store.get(NS, "m3").reviewed_at == first  # unscheduling keeps the record as is


def test_review_calls_validate_input(store: LineageStore) -> None:
    store.record(MemoryRecord(id="m", namespace=NS, creator_id="user:u"))
    with pytest.raises(ValidationError):
        store.due_for_review(NS, now=NOW, limit=-1)
    with pytest.raises(ValidationError):
        store.due_for_review(NS, now=float("nan"))
    with pytest.raises(ValidationError):
        store.schedule_review(NS, {"m": float("inf")})
    with pytest.raises(ValidationError):
        store.schedule_review(NS, [("m", NOW)])  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        store.schedule_review(NS, {"bad id": NOW})
    with pytest.raises(ValidationError):
        store.unschedule_review(NS, "m")
    assert store.schedule_review(NS, {}) == 0
    assert store.unschedule_review(NS, []) == 0


# -- namespace registry ---------------------------------------------------------------------


def test_namespaces_lists_those_with_memories(store: LineageStore) -> None:
    assert store.namespaces() == []
    store.record(MemoryRecord(id="m", namespace="b:ns", creator_id="user:u"))
    store.record(MemoryRecord(id="m", namespace="a:ns", creator_id="user:u"))
    store.record(MemoryRecord(id="n", namespace="a:ns", creator_id="user:u"))
    store.incr_counter("counters:only", "tool:x")
    with pytest.raises(UnknownDependencyError):
        store.record(
            MemoryRecord(
                id="m", namespace="failed:ns", creator_id="user:u", dependencies=("ghost",)
            )
        )
    assert store.namespaces() == ["a:ns", "b:ns"]


def test_members_that_come_back_are_compared_again(store: LineageStore) -> None:
    """A member a Record of its claim met while it was not live (superseded, archived,
    compressed: the embedded store then drops it from the members it compares) is
    compared again once it is live again: confirmed back from archived, or marked
    pending_verification by a cascade from compressed or archived."""
    store.record(claim("a", "agent:A", "x"))
    store.record(claim("a2", "agent:A", "y"))
    store.supersede(NS, "a", "a2")
    store.set_status(NS, "a", Status.ARCHIVED)  # superseded -> archived
    store.record(MemoryRecord(id="base", namespace=NS, creator_id="user:u"))
    store.record(claim("c", "agent:C", "x", "base"))
    store.set_status(NS, "c", Status.COMPRESSED)
    store.record(claim("probe1", "agent:Q", "x"))  # meets a and c while not live
    assert (
        store.get(NS, "probe1").confirmed_by,
        store.get(NS, "probe1").contradicted_by,
    ) == ((), ("agent:A",))  # a2 only
    store.set_status(NS, "a", Status.ACTIVE)  # archived -> active
    store.revoke(NS, "base")  # c: compressed -> pending_verification
    assert store.get(NS, "c").status == Status.PENDING_VERIFICATION
    out = store.record(claim("probe2", "agent:R", "x"))
    # a confirms (x, back from archived), c too (back from compressed), probe1 too; a2
    # (y, live throughout) contradicts
    assert (out.confirmed_by, out.contradicted_by) == (
        ("agent:A", "agent:C", "agent:Q"),
        ("agent:A",),
    )
    got = marks(store, "a", "c")
    assert "agent:R" in got["a"][0] and "agent:R" in got["c"][0]
    assert "agent:Q" not in got["a"][0] + got["c"][0]  # probe1 met neither: not live then


def test_a_claim_recorded_again_and_again_compares_only_its_live_members(
    backend: str, store: LineageStore
) -> None:
    """One source re-recording a claim, each new value superseding the last (a polled
    price): every Record compares with the live members only, and on the embedded
    store the members it keeps to compare stay that few (before: every member ever)."""
    store.record(claim("p0", "tool:price", "0"))
    store.record(claim("other", "tool:other", "0"))
    for i in range(1, 60):
        store.record(claim(f"p{i}", "tool:price", str(i)))
        store.supersede(NS, f"p{i - 1}", f"p{i}")
    out = store.record(claim("probe", "agent:Q", "59"))
    assert (out.confirmed_by, out.contradicted_by) == (("tool:price",), ("tool:other",))
    assert len(store.claim_group(NS, "job:7", "state")) == 62  # the history stays
    if backend == "embedded":
        # the store's own index of the members a Record compares (no public view of it)
        space = store._spaces[NS]  # type: ignore[attr-defined]
        assert set(space.peers[("job:7", "state")]) == {"p59", "other", "probe"}
    else:  # in Redis itself: the claim's peers hash (redis_keys: cp), whole ("~")
        peers = store.client.hkeys(store.keys.claim_peers(NS, "job:7", "state"))  # type: ignore[attr-defined]
        assert set(peers) == {"p59", "other", "probe", "~"}


@pytest.mark.parametrize("how", ["a Record's supersession", "a revision", "a tainted dependency"])
def test_a_member_brought_back_by_any_change_is_compared_again(
    store: LineageStore, how: str
) -> None:
    """Every change that can bring an archived member back to pending_verification
    (the cascade of a Record that supersedes the holder it rests on, the cascade of a
    revision of it, a tainted dependency added to it) puts it back among the members a
    Record compares: on Redis each of these scripts moves the namespace's claim
    revivals, so the next Record reads the whole group once."""
    base = MemoryRecord(
        id="base", namespace=NS, creator_id="tool:feed", subject="job:1", attribute="owner"
    )
    store.record(replace(base, value="v1"))
    store.record(claim("m", "agent:A", "x", "base"))
    store.set_status(NS, "m", Status.ARCHIVED)
    probe1 = store.record(claim("probe1", "agent:Q", "x"))
    assert probe1.confirmed_by == ()  # m is not live: not compared
    if how == "a Record's supersession":
        store.record_claim(replace(base, id="base2", value="v2"), holder="base", supersede="base")
    elif how == "a revision":
        store.revise(replace(base, value="v1", tags=("again",)), expected_version=1)
    else:
        store.record(MemoryRecord(id="bad", namespace=NS, creator_id="user:u"))
        store.revoke(NS, "bad")
        store.add_dependencies(NS, "m", ["bad"], expected_version=store.get(NS, "m").version)
    assert store.get(NS, "m").status == Status.PENDING_VERIFICATION
    out = store.record(claim("probe2", "agent:R", "x"))
    assert "agent:A" in out.confirmed_by
