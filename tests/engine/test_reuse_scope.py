"""On the embedded store a reused decision depends on what it read, not on the whole
namespace: a write elsewhere leaves it standing; a write to a memory of its lineage,
to the statistics of a source whose memory it read, or (when it read one) to a rate
counter ends it. Each reuse is checked against an engine deciding afresh on the same store."""

from __future__ import annotations

from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES

NS = "default"
USER = Creator("user", "user:alice")


class World:
    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.store = EmbeddedStore(clock=self.clock)
        holder = PolicyHolder(BUNDLED_POLICIES)
        self.fresh = Engine(
            self.store, holder, clock=self.clock, reuse_decisions=False, record_access=False
        )
        self.reusing = Engine(self.store, holder, clock=self.clock, record_access=False)

    def record(self, mid: str, creator: str, *, age: float = 0.0, **fields: object) -> None:
        rec = MemoryRecord(
            id=mid,
            namespace=NS,
            creator_kind=creator.split(":")[0],
            creator_id=creator,
            created_at=self.clock() - age,
            **fields,
        )  # type: ignore[arg-type]
        assert self.fresh.record(rec).recorded, mid

    def read(self, mid: str) -> tuple[bool, str]:
        """(answered by reuse, effect), checked equal to a fresh decision."""
        before = self.reusing.reused
        got = self.reusing.check(NS, "read", [mid], USER).decision
        want = self.fresh.check(NS, "read", [mid], USER).decision
        assert got == want, (mid, got, want)
        return self.reusing.reused == before + 1, got.effect


def _world() -> World:
    w = World()
    w.record("thought", "reasoning:planner", creator_confidence=0.9, type="reasoning")
    w.record("plan", "agent:planner", dependencies=("thought",), type="plan")
    w.record("other", "agent:scout", type="fact")
    return w


def test_a_write_elsewhere_in_the_namespace_leaves_a_decision_standing() -> None:
    w = _world()
    assert w.read("plan") == (False, "allow")
    assert w.read("plan") == (True, "allow")
    w.record("note", "agent:scout", type="fact")  # no claim, not in plan's lineage
    w.store.revoke(NS, "other", reason="unrelated")
    assert w.read("plan") == (True, "allow")


def test_a_write_in_its_lineage_ends_it() -> None:
    w = _world()
    w.read("plan")
    assert w.read("plan")[0]
    w.store.revoke(NS, "thought", reason="the planner withdrew it")  # plan's ancestor
    reused, effect = w.read("plan")
    assert not reused and effect == "degrade"  # built on a withdrawn memory
    w.read("thought")
    w.record("child", "agent:planner", dependencies=("thought",))  # a new derivation
    assert not w.read("thought")[0]


def test_a_claim_ends_the_decisions_that_read_a_source_it_moved() -> None:
    w = _world()
    w.record("seat", "tool:crm", subject="user:alice", attribute="seat", value="aisle")
    w.record("crm-note", "tool:crm", type="fact")  # another memory of that source
    for mid in ("plan", "crm-note", "seat"):
        w.read(mid)
        assert w.read(mid)[0], mid
    # Another source contradicts the claim: both sources' statistics move, and with
    # them the credibility of every memory they made (read() checks each answer
    # against a fresh decision, so a decision kept past the move would fail there).
    w.record("seat2", "tool:airline", subject="user:alice", attribute="seat", value="window")
    assert not w.read("crm-note")[0]
    assert not w.read("seat")[0]
    assert w.read("plan")[0]  # its sources' statistics did not move
    # A claim that meets no other source's moves nothing.
    w.record("meal", "tool:crm", subject="user:alice", attribute="meal", value="veg")
    assert w.read("crm-note")[0]


def test_feedback_ends_the_decisions_that_read_its_source() -> None:
    w = _world()
    w.record("crm-note", "tool:crm", type="fact")
    w.record("crm-other", "tool:crm", type="fact")
    for mid in ("plan", "crm-note", "crm-other"):
        w.read(mid)
    used = w.fresh.check(NS, "read", ["crm-note"], USER).decision_id
    assert w.fresh.feedback(NS, used, ["crm-note"], False) == 1  # tool:crm failed once
    assert not w.read("crm-other")[0]  # the same source: its credibility moved
    assert w.read("plan")[0]


def test_a_decision_that_read_a_rate_counter_ends_with_the_next_count() -> None:
    """A stale flight price reads calls("tool:flight_api", 1h): the 10th recorded call
    crosses the hourly quota, which another policy then reports."""
    w = _world()
    w.record("price", "tool:flight_api", age=7200.0, tags=("flight_price",), type="tool_result")
    for i in range(8):
        w.record(f"quote{i}", "tool:flight_api", type="tool_result")
    w.read("price")
    assert w.read("price")[0]
    before = w.reusing.check(NS, "read", ["price"], USER).decision
    w.record("quote8", "tool:flight_api", type="tool_result")  # the 10th call this hour
    reused, _ = w.read("price")
    assert not reused
    after = w.reusing.check(NS, "read", ["price"], USER).decision
    assert {r.policy for r in after.reasons} - {r.policy for r in before.reasons}
    # A decision that read no counter is not ended by the count.
    w.read("plan")
    w.record("quote9", "tool:flight_api", type="tool_result")
    assert w.read("plan")[0]


def test_a_ticket_outlives_an_unrelated_write_not_a_related_one() -> None:
    w = _world()
    _rec, ticket = w.reusing.check_ticketed(NS, "read", ["plan"], USER)
    assert ticket is not None
    w.record("note", "agent:scout", type="fact")
    assert w.reusing.reissue(ticket) is not None
    w.store.revoke(NS, "thought", reason="withdrawn")
    assert w.reusing.reissue(ticket) is None


def test_filter_rank_candidates_depend_on_their_own_lineage() -> None:
    w = _world()
    candidates = [("plan", 0.9), ("other", 0.8)]

    def rank() -> list[tuple[str, str, float]]:
        got = w.reusing.filter_rank(NS, candidates, USER)
        want = w.fresh.filter_rank(NS, candidates, USER)
        out = [(c.memory_id, c.decision.decision.effect, c.rank_score) for c in got]
        assert out == [(c.memory_id, c.decision.decision.effect, c.rank_score) for c in want]
        return out

    rank()
    before = w.reusing.reused
    rank()
    assert w.reusing.reused == before + 2
    w.store.revoke(NS, "other", reason="withdrawn")  # not in plan's lineage
    before = w.reusing.reused
    assert dict((m, e) for m, e, _ in rank())["other"] == "deny"
    assert w.reusing.reused == before + 1  # plan reused, other decided afresh


def test_a_source_that_contradicted_or_confirmed_a_memory_is_one_of_its_sources() -> None:
    """A memory's reliability weighs the credibility of the sources that confirmed or
    contradicted it, not only its creator's: feedback on another memory of one of them
    ends what was kept for it. Before, only the creator's statistics were checked, and
    the seeded differential run (seed 369, below) found a kept view scored with the
    old credibility deciding `weakest_link` where a fresh read did not."""
    w = _world()
    w.record("seat", "tool:crm", subject="user:alice", attribute="seat", value="aisle")
    w.record("seat-no", "tool:airline", subject="user:alice", attribute="seat", value="window")
    w.record("seat-yes", "tool:hotel", subject="user:alice", attribute="seat", value="aisle")
    w.record("airline-note", "tool:airline", type="fact")
    w.record("hotel-note", "tool:hotel", type="fact")
    w.read("plan")
    for source, note in (("tool:airline", "airline-note"), ("tool:hotel", "hotel-note")):
        w.read("seat")
        assert w.read("seat")[0]
        mark = w.store.change_mark()
        assert mark is not None and w.store.unchanged_since(NS, ["seat"], mark)
        used = w.fresh.check(NS, "read", [note], USER).decision_id
        assert w.fresh.feedback(NS, used, [note], False) == 1, source  # its credibility moves
        assert not w.store.unchanged_since(NS, ["seat"], mark), source
        assert not w.read("seat")[0], source
        assert w.read("plan")[0]  # no source of plan moved
