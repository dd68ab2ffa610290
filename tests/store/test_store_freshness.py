"""Reads are never stale, and batched access recording.

The embedded store hands out cached frozen records, Redis reads a BFS level with
one script call, and history is optional on ``get_many``/``lineage_view``: the
scenario below warms every read path (so the embedded caches are hot), applies
one mutating operation, and checks that every read path reflects it right away
and agrees with the others, on every backend.  The embedded-only tests check the
caches themselves: a row's cached record always equals one rebuilt from the row,
two reads with no change in between return the same object, and a change (or an
access flush) yields a new one for the touched rows only.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.lineage import ManualClock, MemoryRecord, StoreLimits, ValidationError
from memlineage.lineage.validation import check_id
from memlineage.store import EmbeddedStore, LineageStore
from memlineage.store.embedded import persistence
from support.memories import NOW, memory

NS = "tenant:fresh"
IDS = ["a", "b", "c", "d", "e", "k1", "k2", "k3"]
mem = partial(memory, ns=NS)


def existing(store: LineageStore) -> list[str]:
    return list(store.get_many(NS, IDS))


def warm(store: LineageStore) -> None:
    """Read every memory through every read path (fills the embedded caches)."""
    ids = existing(store)
    for h in (False, True):
        store.get_many(NS, ids, with_history=h)
        store.lineage_view(NS, ids, ancestor_depth=8, descendant_depth=8, with_history=h)
    for memory_id in ids:
        store.get(NS, memory_id)
        store.ancestors(NS, memory_id)
        store.descendants(NS, memory_id)


def read_all(store: LineageStore, memory_id: str) -> MemoryRecord:
    """Every read path agrees on ``memory_id``; returns the full record (``get``)."""
    full = store.get(NS, memory_id)
    bare = replace(full, status_history=())
    assert store.get_many(NS, [memory_id], with_history=True)[memory_id] == full
    assert store.get_many(NS, [memory_id])[memory_id] == bare
    assert store.lineage_view(NS, [memory_id], with_history=True).records[memory_id] == full
    assert store.lineage_view(NS, [memory_id]).records[memory_id] == bare
    for child in full.derivations:  # read as an ancestor of each child
        assert store.lineage_view(NS, [child]).records[memory_id] == bare
        assert full in store.ancestors(NS, child).records
    for dep in full.dependencies:  # read as a descendant of each dependency
        assert (
            store.lineage_view(
                NS, [dep], ancestor_depth=0, descendant_depth=1, with_history=True
            ).records[memory_id]
            == full
        )
        assert full in store.descendants(NS, str(dep)).records
    return full


def consistent(store: LineageStore) -> None:
    for memory_id in existing(store):
        read_all(store, memory_id)


Hook = Callable[[str], None]


def run_scenario(store: LineageStore, clock: ManualClock, after_mutation: Hook) -> list[str]:
    """Every mutating operation once, each between a full warm-up and its checks.

    ``after_mutation(label)`` runs right after each mutation, before any read."""
    done: list[str] = []

    def step(label: str, mutate: Callable[[], object], check: Callable[[], None]) -> None:
        warm(store)
        mutate()
        after_mutation(label)
        check()
        consistent(store)
        done.append(label)

    def get(memory_id: str) -> MemoryRecord:
        return read_all(store, memory_id)

    store.record(mem("a", creator_id="src:1"))
    store.record(mem("d"))
    store.record(mem("e"))

    def check_child() -> None:
        assert get("a").derivations == ("b",)
        assert get("b").dependencies == ("a",)

    step("record child", lambda: store.record(mem("b", "a")), check_child)
    step(
        "record grandchild",
        lambda: store.record(mem("c", "b")),
        lambda: assert_eq(get("b").derivations, ("c",)),
    )

    def check_archived() -> None:
        a = get("a")
        assert (a.status, a.version, len(a.status_history)) == ("archived", 2, 1)

    step(
        "status change", lambda: store.set_status(NS, "a", "archived", now=NOW + 1), check_archived
    )

    def check_cascade() -> None:
        a, b, c = get("a"), get("b"), get("c")
        assert (a.status, a.version) == ("revoked", 3)
        assert (b.status, b.version, c.status, c.version) == (
            "pending_verification",
            2,
            "pending_verification",
            2,
        )
        assert b.status_history[-1].root_id == "a"
        assert c.status_history[-1].to_status == "pending_verification"

    step(
        "revoke with cascade",
        lambda: store.revoke(NS, "a", reason="bad", now=NOW + 2),
        check_cascade,
    )

    def check_confirm() -> None:
        b = get("b")
        assert (b.status, b.version, b.status_history[-1].reason) == ("active", 3, "ok")

    step("confirm", lambda: store.confirm(NS, "b", reason="ok", now=NOW + 3), check_confirm)

    def check_update() -> None:
        c = get("c")
        assert (c.tags, c.value, c.version) == (("x", "y"), "v2", 3)

    step(
        "compare-and-set update",
        lambda: store.update(NS, "c", 2, {"tags": ["x", "y"], "value": "v2"}),
        check_update,
    )

    def check_add() -> None:
        c, d = get("c"), get("d")
        assert d.dependencies == ("c",)
        assert c.derivations == ("d",)
        assert (d.status, d.version) == ("pending_verification", 2)  # c is pending

    step(
        "add_dependencies",
        lambda: store.add_dependencies(NS, "d", ["c"], expected_version=1),
        check_add,
    )

    def check_access() -> None:
        e = get("e")
        assert (e.access_count, e.last_access, e.version) == (1, NOW + 4, 1)

    step("record_access", lambda: store.record_access(NS, ["e"], now=NOW + 4), check_access)

    def check_accesses() -> None:
        e, d = get("e"), get("d")
        assert (e.access_count, e.last_access) == (4, NOW + 9)
        assert (d.access_count, d.last_access) == (2, NOW + 1)

    step(
        "record_accesses",
        lambda: store.record_accesses(
            NS, {"e": (3, NOW + 9), "d": (2, NOW + 1), "ghost": (1, NOW)}
        ),
        check_accesses,
    )

    def check_feedback() -> None:
        e = get("e")
        assert (e.uses_ok, e.uses_failed) == (1, 0)

    step("feedback ok", lambda: store.feedback(NS, ["e"], True, now=NOW + 5), check_feedback)
    step(
        "feedback failed",
        lambda: store.feedback(NS, ["e"], False, now=NOW + 5),
        lambda: assert_eq(get("e").uses_failed, 1),
    )
    step(
        "schedule_review",
        lambda: store.schedule_review(NS, {"e": NOW + 99}, now=NOW + 6),
        lambda: assert_eq(get("e").reviewed_at, NOW + 6),
    )
    step(
        "unschedule_review",
        lambda: store.unschedule_review(NS, ["e"]),
        lambda: assert_eq(get("e").reviewed_at, NOW + 6),
    )

    claim = {"subject": "user:1", "attribute": "city"}
    store.record(mem("k1", creator_id="src:1", value="Paris", **claim))

    def check_confirmation() -> None:
        assert get("k1").confirmed_by == ("src:2",)
        assert get("k2").confirmed_by == ("src:1",)

    step(
        "claim confirmation",
        lambda: store.record(mem("k2", creator_id="src:2", value="Paris", **claim)),
        check_confirmation,
    )

    def check_contradiction() -> None:
        assert get("k1").contradicted_by == ("src:3",)
        assert get("k2").contradicted_by == ("src:3",)
        assert get("k3").contradicted_by == ("src:1", "src:2")

    step(
        "claim contradiction",
        lambda: store.record(mem("k3", creator_id="src:3", value="Rome", **claim)),
        check_contradiction,
    )

    def check_supersede() -> None:
        k1 = get("k1")
        assert (k1.status, k1.successor) == ("superseded", "k2")

    step("supersede", lambda: store.supersede(NS, "k1", "k2", now=NOW + 7), check_supersede)
    step(
        "evict",
        lambda: store.set_status(NS, "e", "evicted", now=NOW + 8),
        lambda: assert_eq(get("e").status, "evicted"),
    )
    return done


def assert_eq(actual: object, expected: object) -> None:
    assert actual == expected


def test_every_mutation_is_visible_to_the_next_read(
    store: LineageStore, clock: ManualClock
) -> None:
    done = run_scenario(store, clock, lambda label: None)
    assert len(done) == 17


_COLD = itertools.count()


def _check_against_a_cold_replay(
    store: EmbeddedStore, data_dir: Path, clock: ManualClock, limits: StoreLimits, label: str
) -> None:
    """Every read of the warm store (its cached copies) equals the same read of a store
    that replays the log into fresh rows and has cached nothing yet (on an online backup
    of the directory: the warm store holds the directory's lock)."""
    copy = data_dir.parent / f"cold-{next(_COLD)}"
    persistence.backup(data_dir, copy)
    cold = EmbeddedStore(copy, clock=clock, limits=limits)
    try:
        for h in (False, True):
            assert store.get_many(NS, IDS, with_history=h) == cold.get_many(
                NS, IDS, with_history=h
            ), (label, h)
        for memory_id in existing(cold):
            assert store.get(NS, memory_id) == cold.get(NS, memory_id), (label, memory_id)
    finally:
        cold.close()
        shutil.rmtree(copy)


def test_embedded_cached_records_never_outlive_a_change(clock: ManualClock, tmp_path: Path) -> None:
    """Right after each mutation (before the step's own reads), every record the warm
    store hands out still equals a freshly built one: no mutation path forgets to
    drop a cache."""
    limits = StoreLimits(history_length=4)
    store = EmbeddedStore(tmp_path, clock=clock, limits=limits)
    run_scenario(
        store,
        clock,
        lambda label: _check_against_a_cold_replay(store, tmp_path, clock, limits, label),
    )
    store.close()


def test_embedded_hands_out_the_same_object_until_a_change(clock: ManualClock) -> None:
    store = EmbeddedStore(clock=clock)
    store.record(mem("a"))
    store.record(mem("b", "a"))
    store.record(mem("c"))
    a1, b1, c1 = store.get(NS, "a"), store.get(NS, "b"), store.get(NS, "c")
    assert store.get(NS, "a") is a1
    # No history: the record without it is the same object.
    assert store.get_many(NS, ["a", "b"])["a"] is a1
    view = store.lineage_view(NS, ["b"]).records
    assert view["a"] is a1 and view["b"] is b1

    # An access flush drops only the touched rows' copies.
    store.record_accesses(NS, {"a": (2, NOW + 1)})
    a2 = store.get(NS, "a")
    assert a2 is not a1 and a2.access_count == 2
    assert store.get(NS, "b") is b1 and store.get(NS, "c") is c1

    # A new derivation is a change of the parent (not of its siblings).
    store.record(mem("d", "b"))
    b2 = store.get(NS, "b")
    assert b2 is not b1 and b2.derivations == ("d",)
    assert store.get(NS, "a") is a2 and store.get(NS, "c") is c1

    # With history: two cached copies, each stable until the next change.
    store.revoke(NS, "c", now=NOW + 2)
    full, bare = store.get(NS, "c"), store.get_many(NS, ["c"])["c"]
    assert full is not c1 and full.status_history and not bare.status_history
    assert store.get(NS, "c") is full and store.get_many(NS, ["c"])["c"] is bare
    assert store.lineage_view(NS, ["c"], with_history=True).records["c"] is full


# -- history is optional on get_many / lineage_view ----------------------------------


def test_history_only_when_asked(store: LineageStore) -> None:
    store.record(mem("p"))
    store.record(mem("q", "p"))
    store.revoke(NS, "p", reason="gone", now=NOW + 1)
    assert store.get(NS, "p").status_history  # get keeps history
    assert store.get(NS, "q").status_history
    assert store.get_many(NS, ["p"])["p"].status_history == ()
    assert store.get_many(NS, ["p"], with_history=True)["p"].status_history
    view = store.lineage_view(NS, ["q"])
    assert view.records["p"].status_history == () and view.records["q"].status_history == ()
    assert view.records["p"].derivations == ("q",)  # derivations always carried
    view = store.lineage_view(NS, ["q"], with_history=True)
    assert view.records["p"].status_history and view.records["q"].status_history
    # The walks (Explain) carry history.
    assert store.ancestors(NS, "q").records[0].status_history
    assert store.descendants(NS, "p").records[0].status_history


# -- batched access recording ----------------------------------------------------------


def test_record_accesses_adds_counts_and_keeps_latest_time(store: LineageStore) -> None:
    store.record(mem("m1"))
    store.record(mem("m2"))
    assert (
        store.record_accesses(NS, {"m1": (3, NOW + 10), "m2": (1, NOW + 5), "ghost": (4, NOW)}) == 2
    )
    assert store.record_accesses(NS, {"m1": (2, NOW + 7)}) == 1  # late flush: time kept
    m1, m2 = store.get(NS, "m1"), store.get(NS, "m2")
    assert (m1.access_count, m1.last_access, m1.version) == (5, NOW + 10, 1)
    assert (m2.access_count, m2.last_access) == (1, NOW + 5)
    assert store.record_accesses(NS, {}) == 0
    assert store.record_accesses("other", {"m1": (1, NOW)}) == 0
    assert store.record_access(NS, ["m2", "m2", "ghost"], now=NOW + 20) == 1
    assert store.get(NS, "m2").access_count == 2  # duplicates count once, as before


@pytest.mark.parametrize(
    "accesses",
    [
        ["m1"],
        {"m1": 1},
        {"m1": (1,)},
        {"m1": (0, NOW)},
        {"m1": (-1, NOW)},
        {"m1": (True, NOW)},
        {"m1": (1.5, NOW)},
        {"m1": (1, -1.0)},
        {"m1": (1, float("nan"))},
        {"m1": (1, "now")},
        {"bad id!": (1, NOW)},
    ],
)
def test_record_accesses_validates_and_writes_nothing(
    store: LineageStore, accesses: object
) -> None:
    store.record(mem("m1"))
    with pytest.raises(ValidationError):
        store.record_accesses(NS, accesses)  # type: ignore[arg-type]
    assert store.get(NS, "m1").access_count == 0


def test_ids_batch_validation_reports_the_bad_one(store: LineageStore) -> None:
    ok = [f"m:{i}" for i in range(5)]
    assert store.get_many(NS, ok) == {}
    for bad, field in (
        ([*ok, "x y"], "ids[5]"),
        ([*ok, ""], "ids[5]"),
        ([7, *ok], "ids[0]"),
        ([*ok, "a\nb"], "ids[5]"),
        (["z" * 129], "ids[0]"),
    ):
        with pytest.raises(ValidationError) as err:
            store.get_many(NS, bad)
        assert err.value.field == field


# -- embedded persistence of the new paths ----------------------------------------------


def test_embedded_snapshot_keeps_a_link_to_a_later_memory(
    tmp_path: Path, clock: ManualClock
) -> None:
    """add_dependencies can make a memory depend on one recorded after it: the snapshot
    lists rows in record order, so loading it must link once every row is in."""
    store = EmbeddedStore(tmp_path, clock=clock)
    store.record(mem("early"))
    store.record(mem("late"))
    store.add_dependencies(NS, "early", ["late"], expected_version=1)
    expected = {i: store.get(NS, i) for i in ("early", "late")}
    store.compact()
    store.close()
    again = EmbeddedStore(tmp_path, clock=clock)
    assert {i: again.get(NS, i) for i in ("early", "late")} == expected
    assert again.get(NS, "late").derivations == ("early",)
    again.close()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab:\n .-é/_\t", max_size=6) | st.integers(), max_size=6))
def test_ids_batch_validation_agrees_with_check_id(ids: list[object]) -> None:
    store = EmbeddedStore()
    try:
        for i, memory_id in enumerate(dict.fromkeys(ids)):
            check_id(memory_id, f"ids[{i}]")
        valid = True
    except ValidationError:
        valid = False
    try:
        store.get_many(NS, ids)  # type: ignore[arg-type]
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted == valid
