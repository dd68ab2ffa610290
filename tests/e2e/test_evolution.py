"""Reliability and memory evolution through the real sidecar (embedded and Redis):
multi-agent contradiction and consensus, decay by volatility, the governance
sweep archiving idle memories (and refusing evictions), supersession links."""

from __future__ import annotations

import pytest
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import World

DAY = 86400.0


def texts(d: pb.Decision) -> list[str]:
    return [o.text for o in d.obligations if o.text]


def test_a_contradiction_and_consensus_between_agents(world: World) -> None:
    c = world.alice
    c.record("task-a", creator="agent:a", claim=("task:42", "state", "done"))
    c.record("task-b", creator="agent:b", claim=("task:42", "state", "failed"))
    a, b = c.explain("task-a").memory, c.explain("task-b").memory
    assert a.status == b.status == pb.STATUS_ACTIVE  # contradiction, not supersession
    assert list(a.contradicted_by) == ["agent:b"] and list(b.contradicted_by) == ["agent:a"]
    prior = 0.7  # agent:* credibility before any track record, confidence 1
    assert a.reliability < prior and b.reliability < prior

    c.record("task-c", creator="agent:c", claim=("task:42", "state", "failed"))
    ranked = c.filter_rank([("task-a", 0.9), ("task-b", 0.9)])
    assert list(ranked.ranked_ids) == ["task-b", "task-a"]
    after_a, after_b = c.explain("task-a"), c.explain("task-b")
    assert after_b.memory.reliability > after_a.memory.reliability
    assert after_b.memory.reliability > b.reliability  # consensus raised it
    cred = {s.source: s for s in after_a.sources}
    assert cred["agent:a"].credibility < prior and cred["agent:a"].bad == 2
    assert cred["agent:c"].credibility > cred["agent:a"].credibility


def test_b_volatile_readings_decay_goals_do_not(world: World) -> None:
    c = world.alice
    c.record("cpu-80", creator="tool:metrics", volatility="high", tags=["live"])
    c.record("goal-visa", creator="user:alice", volatility="low")
    cpu0, goal0 = (c.explain(i).memory.reliability for i in ("cpu-80", "goal-visa"))
    world.clock.advance(600)  # one half-life of the "high" class
    cpu1, goal1 = (c.explain(i).memory.reliability for i in ("cpu-80", "goal-visa"))
    assert cpu1 <= cpu0 / 2 + 1e-9
    assert goal1 == pytest.approx(goal0)
    world.clock.advance(365 * DAY)
    assert c.explain("goal-visa").memory.reliability == pytest.approx(goal0)


def test_c_idle_memories_are_archived_and_kept_for_history(world: World) -> None:
    c = world.alice
    c.record("old-note", creator="agent:planner", type="note")
    world.clock.advance(30 * DAY)
    c.record("new-note", creator="agent:planner", type="note")
    report = world.admin.run_sweep(namespace="user-a")
    moved = {t.memory_id: t for t in report.transitions}
    assert moved["old-note"].to_status == pb.STATUS_ARCHIVED
    assert "new-note" not in moved and report.examined == 1
    history = c.explain("old-note").memory.history
    assert history[-1].to_status == pb.STATUS_ARCHIVED and "sweep: value" in history[-1].reason

    ordinary = c.filter_rank([("old-note", 0.9), ("new-note", 0.5)])
    assert list(ordinary.ranked_ids) == ["new-note"]
    historical = c.filter_rank([("old-note", 0.9)], historical=True)
    assert list(historical.ranked_ids) == ["old-note"]
    assert "historical reference, may be outdated" in texts(historical.candidates[0].decision)


def test_d_superseded_preference_points_to_its_successor(world: World) -> None:
    c = world.alice
    c.record("seat-1", creator="user:alice", claim=("user:alice", "seat", "window"))
    fix = c.record("seat-2", creator="user:alice", claim=("user:alice", "seat", "aisle"))
    assert fix.superseded_id == "seat-1"
    old = c.explain("seat-1").memory
    assert old.status == pb.STATUS_SUPERSEDED and old.successor == "seat-2"
    d = c.check("read", "seat-1")
    assert d.effect == pb.EFFECT_DEGRADE
    assert "superseded by seat-2; use it instead" in texts(d)


def test_e_sweep_refuses_to_evict_what_others_rest_on(world: World) -> None:
    c = world.alice
    c.record("research", creator="agent:planner", type="note")
    c.record("plan", creator="agent:planner", dependencies=["research"])
    world.clock.advance(30 * DAY)
    assert c.check("read", "plan").effect == pb.EFFECT_ALLOW  # keeps the plan in use
    first = world.admin.run_sweep(namespace="user-a")
    assert {t.memory_id: t.to_status for t in first.transitions} == {"research": pb.STATUS_ARCHIVED}

    world.clock.advance(31 * DAY)
    c.check("read", "plan")
    second = world.admin.run_sweep(namespace="user-a")
    refused = {t.memory_id: t for t in second.refused}
    assert "research" in refused and "active descendants (plan)" in refused["research"].reason
    assert c.explain("research").memory.status == pb.STATUS_ARCHIVED

    c.revoke("plan", actor="agent:planner")  # nothing live rests on it any more
    world.clock.advance(DAY)
    third = world.admin.run_sweep(namespace="user-a")
    assert {t.memory_id: t.to_status for t in third.transitions}.get(
        "research"
    ) == pb.STATUS_EVICTED


def test_feedback_moves_accuracy_and_credibility(world: World) -> None:
    c = world.alice
    c.record("tip", creator="tool:guide")
    d = c.check("read", "tip")
    before = {s.source: s.credibility for s in c.explain("tip").sources}["tool:guide"]
    for _ in range(3):
        c.feedback(d.decision_id, ["tip"], success=False)
    ex = c.explain("tip")
    assert ex.memory.uses_failed == 3
    assert {s.source: s.credibility for s in ex.sources}["tool:guide"] < before
