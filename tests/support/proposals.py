"""The Proposal builders of the suites that store proposals (the agent-voice
objection window) and then fault or damage them."""

from __future__ import annotations

from memlineage.lineage.proposals import POSTPONED, Objection, Proposal

from support.memories import NOW

OWNER = "agent:planner"


def pending_for_an_hour(ns: str, memory_id: str, now: float) -> Proposal:
    """What the sweep saves when `memory_id`'s value stays low: to archive, owned by
    `OWNER`, its objection window an hour from `now` (no sweep on a real clock decides
    it while a test runs)."""
    return Proposal(
        memory_id=memory_id,
        namespace=ns,
        from_status="active",
        to_status="archived",
        reason="its value stayed low",
        owners=(OWNER,),
        proposed_at=now,
        deadline=now + 3600,
    )


def stale_at_now(ns: str, memory_id: str, *, objected: bool = False) -> Proposal:
    """A proposal made at the store suites' `NOW`, its window 60 s; `objected`:
    postponed, with `OWNER`'s objection at NOW + 1."""
    return Proposal(
        memory_id=memory_id,
        namespace=ns,
        from_status="active",
        to_status="archived",
        reason="stale",
        owners=(OWNER,),
        proposed_at=NOW,
        deadline=NOW + 60,
        state=POSTPONED if objected else "pending",
        objections=(Objection(NOW + 1, OWNER, "still needed"),) if objected else (),
    )
