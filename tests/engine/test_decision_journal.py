"""The decision journal: found by id while its slot is not reused, recent decisions
of a memory newest first, ids of other processes never found."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memlineage.engine.records import (
    DecisionContext,
    DecisionJournal,
    DecisionRecord,
    issue_decision_id,
    issue_decision_ids,
)
from memlineage_dsl.decision import Decision

ALLOW = Decision("allow", 1.0, 0.0)


def _rec(decision_id: str, memory: str = "m", ns: str = "ns") -> DecisionRecord:
    return DecisionRecord(decision_id, ALLOW, ns, "read", (memory,), "user:u", 1.0, "v1")


def _issue(journal: DecisionJournal, memory: str = "m", ns: str = "ns") -> DecisionRecord:
    decision_id, serial = issue_decision_id(1.0)
    rec = _rec(decision_id, memory, ns)
    journal.put(serial, rec)
    return rec


def test_found_by_id_until_its_slot_is_reused() -> None:
    journal = DecisionJournal(limit=8)
    first = [_issue(journal) for _ in range(8)]
    assert all(journal.get("ns", r.decision_id) is r for r in first)
    ids, serials = issue_decision_ids(2.0, 3)
    later = [_rec(i) for i in ids]
    journal.put_many(serials, later)
    assert [journal.get("ns", r.decision_id) for r in first[:3]] == [None, None, None]
    assert all(journal.get("ns", r.decision_id) is r for r in first[3:] + later)


def test_ids_not_of_this_process_are_not_found() -> None:
    journal = DecisionJournal(limit=8)
    rec = _issue(journal)
    head, _, serial = rec.decision_id.rpartition("-")
    assert journal.get("ns", f"d1-00000000-{serial}") is None  # another process's prefix
    assert journal.get("ns", "nonsense") is None
    assert journal.get("ns", f"{head}-zz") is None


def test_recent_is_newest_first_per_namespace_and_memory() -> None:
    journal = DecisionJournal(per_memory=3, limit=64)
    issued = [issue_decision_id(1.0) for _ in range(10)]
    recs = [_rec(did, memory="a" if i % 2 else "b") for i, (did, _) in enumerate(issued)]
    for (_, serial), rec in reversed(list(zip(issued, recs, strict=True))):  # out of order
        journal.put(serial, rec)
    _issue(journal, memory="a", ns="other")
    got = journal.recent("ns", "a", 10)
    assert got == [recs[9], recs[7], recs[5]]  # capped at per_memory


def test_a_reused_decision_is_kept_as_its_context_and_rebuilt() -> None:
    journal = DecisionJournal(per_memory=5, limit=8)
    ctx = DecisionContext(ALLOW, "ns", "read", ("a",), "user:u", "v1")
    issued = []
    for k in range(3):
        decision_id, serial = issue_decision_id(100.0 + k / 8)
        journal.put_issue(serial, ctx, 100.0 + k / 8)
        issued.append(decision_id)
    got = journal.get("ns", issued[1])
    assert got == DecisionRecord(issued[1], ALLOW, "ns", "read", ("a",), "user:u", 100.125, "v1")
    assert [r.decision_id for r in journal.recent("ns", "a", 5)] == issued[::-1]
    assert journal.recent("ns", "b", 5) == [] and journal.recent("other", "a", 5) == []
    for _ in range(8):  # the slots move on
        _issue(journal, memory="b")
    assert journal.get("ns", issued[1]) is None
    assert journal.recent("ns", "a", 5) == []


def test_a_decision_id_does_not_count_the_decisions_between_two() -> None:
    """The serial in an id is masked per process: a tenant's consecutive ids do not tell
    how many decisions (other tenants') came between them (before: a plain hex counter,
    `-7` then `-f`: 7 decisions of others in between). The journal still finds each."""
    from itertools import pairwise

    from memlineage.engine.records import _serial_of, decision_id_of, issue_decision_ids

    tokens = [decision_id_of(1.0, s).rpartition("-")[2] for s in range(1, 2001)]
    assert len(set(tokens)) == 2000 and all(len(t) == 16 for t in tokens)
    steps = [int(b, 16) - int(a, 16) for a, b in pairwise(tokens)]
    assert len(set(steps)) == len(steps)  # no stride to divide a gap by
    rising = sum(1 for d in steps if d > 0) / len(steps)
    assert 0.4 < rising < 0.6, rising  # and no order: up or down alike
    assert all(_serial_of(decision_id_of(1.0, s)) == s for s in (0, 1, 2, 2**40, 2**64 - 1))
    for count in (3, 50):  # one by one, and numpy's batch: the same tokens
        ids, serials = issue_decision_ids(5.0, count)
        assert [_serial_of(i) for i in ids] == serials
        assert [i.rpartition("-")[2] for i in ids] == [
            decision_id_of(5.0, n).rpartition("-")[2] for n in serials
        ]


class _SameHash(str):
    """A memory id whose hash is another's: the journal's key is shared by chance."""

    def __hash__(self) -> int:
        return hash("a")


def test_recent_finds_each_memory_of_an_act_and_only_that_memory_on_a_shared_key() -> None:
    """Explain reads the slots whose key is the memory's (or an act's, several memories'):
    a decision on several memories is found for each of them, and a slot of another
    memory whose id hashes alike is read but not returned."""
    journal = DecisionJournal(per_memory=10, limit=64)
    act_id, serial = issue_decision_id(1.0)
    act = DecisionRecord(act_id, ALLOW, "ns", "act", ("a", "b"), "agent:x", 1.0, "v1")
    journal.put(serial, act)
    own = _issue(journal, memory="a")
    twin = _issue(journal, memory=_SameHash("twin"))
    ids, serials = issue_decision_ids(2.0, 2)  # FilterRank's way in
    ranked = [_rec(ids[0], memory="b"), _rec(ids[1], memory=_SameHash("twin"))]
    journal.put_many(serials, ranked)
    ctx = DecisionContext(ALLOW, "ns", "read", (_SameHash("twin"),), "user:u", "v1")
    reused_id, reused_serial = issue_decision_id(3.0)
    journal.put_issue(reused_serial, ctx, 3.0)
    assert journal.recent("ns", "a", 10) == [own, act]
    assert journal.recent("ns", "b", 10) == [ranked[0], act]
    assert [r.decision_id for r in journal.recent("ns", _SameHash("twin"), 10)] == [
        reused_id,
        ranked[1].decision_id,
        twin.decision_id,
    ]
    assert journal.recent("ns", "c", 10) == [] and journal.recent("other", "a", 10) == []


class _CountedSlots(list):  # type: ignore[type-arg]
    """The journal's slots, counting each one read (by index or by iterating)."""

    read = 0

    def __getitem__(self, i: Any) -> Any:
        self.read += 1
        return super().__getitem__(i)

    def __iter__(self) -> Iterator[Any]:
        for item in super().__iter__():
            self.read += 1
            yield item


def test_recent_reads_no_slot_of_an_unrelated_memory() -> None:
    """Explain's lookup reads only the slots keyed for the memory (before: every slot,
    100,000 by default, in Python, ~5-12 ms with the GIL held, on each Explain, which
    the store adapters ask before every update). The slots are the journal's own, so
    this reaches inside: the cost is what is asserted, no answer shows it."""
    journal = DecisionJournal(per_memory=5, limit=256)
    for k in range(250):
        _issue(journal, memory=f"other{k}")
    mine = _issue(journal, memory="mine")
    ring = journal._rings["ns"]
    ring.slots = slots = _CountedSlots(ring.slots)
    assert journal.recent("ns", "mine", 5) == [mine]
    assert slots.read == 1


def test_a_memorys_recent_decisions_read_no_other_namespaces_acts() -> None:
    """Acts (decisions on several memories) were all read for every namespace's
    Explain: one tenant's 40,000 acts took another's Explain from 1 ms to 42 ms, and
    timed its volume (an outside audit). Each namespace has its own ring: another's
    acts are not there to read."""
    journal = DecisionJournal()
    mine = _issue(journal, memory="seat", ns="beta")
    for _ in range(2_000):  # another tenant's acts
        ids, serials = issue_decision_ids(1.0, 1)
        journal.put(
            serials[0],
            DecisionRecord(ids[0], ALLOW, "alpha", "act", ("a", "b"), "agent:x", 1.0, "v1"),
        )
    ring = journal._rings["beta"]
    ring.slots = slots = _CountedSlots(ring.slots)
    assert [r.decision_id for r in journal.recent("beta", "seat", 5)] == [mine.decision_id]
    assert slots.read == 1
    assert len(journal.recent("alpha", "a", 5)) == 5  # its own acts are still found


def test_another_namespaces_volume_ends_no_decision_early() -> None:
    """One ring for every namespace let one tenant's traffic push another's decisions
    out, and the moment a marker decision left told the total volume (an outside
    audit). A namespace keeps its newest `limit` whatever the others issue."""
    journal = DecisionJournal(limit=8)
    marker = _issue(journal, memory="m", ns="quiet")
    for k in range(100):  # another tenant, in every way a decision comes in
        _issue(journal, memory=f"x{k}", ns="busy")
        ids, serials = issue_decision_ids(1.0, 3)
        journal.put_many(serials, [_rec(i, "y", "busy") for i in ids])
        ctx = DecisionContext(ALLOW, "busy", "read", ("z",), "user:u", "v1")
        did, serial = issue_decision_id(2.0)
        journal.put_issue(serial, ctx, 2.0)
    assert journal.get("quiet", marker.decision_id) is marker
    assert journal.recent("quiet", "m", 5) == [marker]
    assert journal.get("busy", marker.decision_id) is None  # asked in another namespace
    assert journal.get("quiet", did) is None
    own = [_issue(journal, memory="m", ns="quiet") for _ in range(7)]
    assert journal.get("quiet", marker.decision_id) is marker  # its 8th: still held
    _issue(journal, memory="m", ns="quiet")
    assert journal.get("quiet", marker.decision_id) is None  # its own 9th ends it
    assert journal.recent("quiet", "m", 20)[-1] == own[0]


def test_a_batch_of_several_namespaces_goes_to_each_ring() -> None:
    from collections import deque

    journal = DecisionJournal(limit=4)
    journal.queue = deque()  # as beside a store that keeps decisions
    ids, serials = issue_decision_ids(1.0, 4)
    recs = [_rec(i, "m", ns) for i, ns in zip(ids, ("a", "b", "a", "b"), strict=True)]
    journal.put_many(serials, recs)
    assert list(journal.queue) == recs  # queued once each, in their order
    assert [journal.get(r.namespace, r.decision_id) for r in recs] == recs
    assert journal.recent("a", "m", 5) == [recs[2], recs[0]]


def test_recent_rebuilds_only_the_decisions_it_returns(monkeypatch: Any) -> None:
    """Explain rebuilt every act of the namespace under the ring's lock, so an Explain
    in a namespace of 100,000 acts held its decisions for ~0.1 s (a review): now the
    slots are only copied under the lock, and only the newest returned are rebuilt."""
    journal = DecisionJournal(per_memory=5)
    act = DecisionContext(ALLOW, "ns", "act", ("a", "b"), "agent:x", "v1")
    for k in range(200):
        _, serial = issue_decision_id(1.0 + k)
        journal.put_issue(serial, act, 1.0 + k)
    built: list[object] = []
    real = DecisionContext.record

    def counted(self: DecisionContext, decision_id: str, decided_at: float) -> DecisionRecord:
        built.append(decision_id)
        return real(self, decision_id, decided_at)

    monkeypatch.setattr(DecisionContext, "record", counted)
    got = journal.recent("ns", "a", 5)
    assert [r.decided_at for r in got] == [200.0, 199.0, 198.0, 197.0, 196.0]
    assert len(built) == 5
