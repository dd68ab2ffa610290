"""The decision journal: found by id while its slot is not reused, recent decisions
of a memory newest first, ids of other processes never found."""

from __future__ import annotations

from memlineage.engine.records import (
    DecisionJournal,
    DecisionRecord,
    new_decision_id,
    new_decision_ids,
)
from memlineage_dsl.decision import Decision

ALLOW = Decision("allow", 1.0, 0.0)


def _rec(decision_id: str, memory: str = "m", ns: str = "ns") -> DecisionRecord:
    return DecisionRecord(decision_id, ALLOW, ns, "read", (memory,), "user:u", 1.0, "v1")


def test_found_by_id_until_its_slot_is_reused() -> None:
    journal = DecisionJournal(limit=8)
    first = [_rec(new_decision_id(1.0)) for _ in range(8)]
    for rec in first:
        journal.add(rec)
    assert all(journal.get(r.decision_id) is r for r in first)
    later = [_rec(i) for i in new_decision_ids(2.0, 3)]
    journal.add_many(later)
    assert [journal.get(r.decision_id) for r in first[:3]] == [None, None, None]
    assert all(journal.get(r.decision_id) is r for r in first[3:] + later)


def test_ids_not_of_this_process_are_not_found() -> None:
    journal = DecisionJournal(limit=8)
    rec = _rec(new_decision_id(1.0))
    journal.add(rec)
    head, _, serial = rec.decision_id.rpartition("-")
    assert journal.get(f"d1-00000000-{serial}") is None  # another process's prefix
    assert journal.get("nonsense") is None
    assert journal.get(f"{head}-zz") is None


def test_recent_is_newest_first_per_namespace_and_memory() -> None:
    journal = DecisionJournal(per_memory=3, limit=64)
    recs = [_rec(new_decision_id(1.0), memory="a" if i % 2 else "b") for i in range(10)]
    for rec in reversed(recs):  # added out of order: FilterRank reserves ids first
        journal.add(rec)
    journal.add(_rec(new_decision_id(1.0), memory="a", ns="other"))
    got = journal.recent("ns", "a", 10)
    assert got == [recs[9], recs[7], recs[5]]  # capped at per_memory
