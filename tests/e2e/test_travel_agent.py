"""The travel-planning agent of the product story, scripted without an LLM, against
a real sidecar (embedded and Redis store) through the Python client."""

from __future__ import annotations

import pytest
from memlineage.client import MemLineageClient, PermissionDenied
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import World

HOUR = 3600.0


def kinds(decision: pb.Decision) -> list[str]:
    return [o.kind for o in decision.obligations]


def texts(decision: pb.Decision) -> list[str]:
    return [o.text for o in decision.obligations if o.text]


def test_a_one_users_preferences_never_reach_another(world: World) -> None:
    rec = world.alice.record(
        "pref-window-seat",
        creator="user:alice",
        type="preference",
        claim=("user:alice", "seat", "window"),
    )
    assert rec.recorded
    ranked = world.alice.filter_rank([("pref-window-seat", 0.9)])
    assert list(ranked.ranked_ids) == ["pref-window-seat"]

    # Bob's memory store names Alice's memory id: in his namespace it is an id with no
    # lineage, answered exactly like one nobody ever recorded (nothing says Alice has it).
    leaked = world.bob.filter_rank([("pref-window-seat", 0.99), ("never-recorded", 0.99)])
    theirs, nobodys = leaked.candidates
    assert theirs.decision.effect == nobodys.decision.effect != pb.EFFECT_ALLOW
    assert [r.policy for r in theirs.decision.reasons] == [
        r.policy for r in nobodys.decision.reasons
    ]
    assert theirs.rank_score == nobodys.rank_score
    a, b = world.bob.check("read", "pref-window-seat"), world.bob.check("read", "never-recorded")
    assert (a.effect, list(a.reasons)) == (b.effect, list(b.reasons))
    # ... and Bob may record his own memory under the same human-readable id.
    assert world.bob.record("pref-window-seat", creator="user:bob", type="preference").recorded
    assert world.bob.check("read", "pref-window-seat").effect == pb.EFFECT_ALLOW
    assert world.alice.check("read", "pref-window-seat").effect == pb.EFFECT_ALLOW

    # Naming Alice's namespace is refused outright.
    as_alice = MemLineageClient(world.sidecar.address, token="token-bob", namespace="user-a")
    with pytest.raises(PermissionDenied, match="namespace"):
        as_alice.filter_rank([("pref-window-seat", 0.99)])
    with pytest.raises(PermissionDenied):
        as_alice.record("x", creator="user:bob")
    as_alice.close()


def test_b_stale_price_refreshed_until_the_paid_api_quota(world: World) -> None:
    now = world.now
    world.alice.record(
        "price-pek-sha",
        creator="tool:flight_api",
        type="tool_result",
        tags=["flight_price"],
        created_at=now - 2 * HOUR,
    )
    first = world.alice.check("read", "price-pek-sha", budget=0.05)
    assert first.effect == pb.EFFECT_DEGRADE
    refresh = [o for o in first.obligations if o.kind == "refresh"]
    assert [o.source for o in refresh] == ["tool:flight_api"]
    assert first.expected_cost == pytest.approx(0.02)

    # The agent honours the obligation ten times within the hour (each refresh is
    # a new price memory from the paid API).
    for i in range(10):
        world.clock.advance(60)
        world.alice.record(
            f"price-refresh-{i}",
            creator="tool:flight_api",
            type="tool_result",
            tags=["flight_price_raw"],
        )
    after = world.alice.check("read", "price-pek-sha", budget=0.05)
    assert after.effect == pb.EFFECT_DEGRADE
    assert "refresh" not in kinds(after)
    assert "historical price, may be outdated" in texts(after)
    assert after.compliance_score < first.compliance_score
    statuses = {r.policy: r.status for r in after.reasons}
    assert statuses["freshest_flight_price"] == "waived"

    # An hour later the quota window has passed: refreshes are paid for again.
    world.clock.advance(HOUR)
    later = world.alice.check("read", "price-pek-sha", budget=0.05)
    assert "refresh" in kinds(later)


def test_c_corrected_city_puts_derived_plans_in_doubt(world: World) -> None:
    c = world.alice
    c.record("city-1", creator="user:alice", claim=("user:alice", "destination_city", "Shanghai"))
    c.record("hotel-1", creator="agent:planner", dependencies=["city-1"])
    c.record("train-1", creator="agent:planner", dependencies=["city-1"])
    assert c.check("read", "hotel-1").effect == pb.EFFECT_ALLOW

    fix = c.record(
        "city-2", creator="user:alice", claim=("user:alice", "destination_city", "Beijing")
    )
    assert fix.recorded and fix.superseded_id == "city-1"
    assert sorted(fix.affected_ids) == ["hotel-1", "train-1"]
    for stale in ("hotel-1", "train-1"):
        d = c.check("read", stale)
        assert d.effect == pb.EFFECT_DEGRADE
        assert "require_confirmation" in kinds(d)
        assert c.explain(stale).memory.status == pb.STATUS_PENDING_VERIFICATION
        assert c.check("act", [stale], action="book").effect == pb.EFFECT_DENY

    c.record("hotel-2", creator="agent:planner", dependencies=["city-2"])
    c.record("train-2", creator="agent:planner", dependencies=["city-2"])
    assert c.check("read", "hotel-2").effect == pb.EFFECT_ALLOW
    assert c.check("act", ["hotel-2", "train-2"], action="book").effect == pb.EFFECT_ALLOW


def test_d_tools_cannot_change_what_the_user_said(world: World) -> None:
    c = world.alice
    c.record("budget-cap", creator="user:alice", claim=("user:alice", "budget", "2000 EUR"))
    assert c.check("update", "budget-cap", actor="tool:flight_api").effect == pb.EFFECT_DENY
    assert c.check("delete", "budget-cap", actor="agent:planner").effect == pb.EFFECT_DENY
    assert c.check("update", "budget-cap", actor="user:alice").effect == pb.EFFECT_ALLOW

    revoke = c.revoke("budget-cap", reason="tool says so", actor="tool:flight_api")
    assert not revoke.applied and revoke.decision.effect == pb.EFFECT_DENY
    assert c.explain("budget-cap").memory.status == pb.STATUS_ACTIVE

    overwrite = c.record(
        "budget-guess", creator="tool:web_search", claim=("user:alice", "budget", "500 EUR")
    )
    assert not overwrite.recorded and overwrite.decision.effect == pb.EFFECT_DENY
    assert c.explain("budget-cap").memory.status == pb.STATUS_ACTIVE

    assert c.revoke("budget-cap", actor="user:alice").applied


def test_e_low_confidence_reasoning_is_filtered_out(world: World) -> None:
    c = world.alice
    c.record("guess-weather", creator="reasoning:planner", confidence=0.4)
    c.record("sure-visa", creator="reasoning:planner", confidence=0.95)
    c.record("user-diet", creator="user:alice")
    ranked = c.filter_rank([("guess-weather", 0.95), ("sure-visa", 0.7), ("user-diet", 0.8)])
    assert list(ranked.ranked_ids) == ["user-diet", "sure-visa"]
    dropped = {r.memory_id: r for r in ranked.candidates}["guess-weather"]
    assert not dropped.kept and dropped.decision.effect == pb.EFFECT_DENY


def test_f_broken_policy_reload_is_rejected_and_old_set_keeps_serving(world: World) -> None:
    before = world.admin.list_policies()
    world.alice.record("g", creator="reasoning:planner", confidence=0.3)
    assert world.alice.check("read", "g").effect == pb.EFFECT_DENY

    broken = {
        "policies/new.mlp": "policy p {\n  on read\n  when memory.confidence < 0.5\n"
        '  degarde annotate("x")\n}\n'
    }
    out = world.admin.reload_policies(broken)
    assert not out.applied and out.version == before.version
    assert out.diagnostics[0].rendered.startswith("policies/new.mlp:4:3: error[E")
    assert (out.diagnostics[0].line, out.diagnostics[0].column) == (4, 3)

    d = world.alice.check("read", "g")
    assert d.effect == pb.EFFECT_DENY and d.policy_version == before.version
    assert world.admin.list_policies().version == before.version

    with pytest.raises(PermissionDenied):
        world.alice.reload_policies(broken)


def test_g_an_action_relying_on_web_output_is_denied(world: World) -> None:
    c = world.alice
    c.record("web-deal", creator="tool:web_search", tags=["travel"])
    c.record("plan-pay", creator="agent:planner", dependencies=["web-deal"])
    c.record("iban", creator="user:alice", type="fact")
    transfer = c.check("act", ["plan-pay", "iban"], action="transfer_money")
    assert transfer.effect == pb.EFFECT_DENY
    assert any(r.policy == "untrusted_lineage_cannot_act" for r in transfer.reasons)
    assert c.check("act", ["iban"], action="transfer_money").effect == pb.EFFECT_ALLOW


def test_h_unknown_provenance_gets_the_documented_decision(world: World) -> None:
    ranked = world.alice.filter_rank([("legacy-note-17", 0.8)])
    cand = ranked.candidates[0]
    assert cand.kept and cand.decision.effect == pb.EFFECT_DEGRADE
    assert "unknown provenance: no lineage recorded" in texts(cand.decision)
    assert cand.rank_score == pytest.approx(0.8 * 0.5 * 0.5)
    assert world.alice.check("act", ["legacy-note-17"]).effect == pb.EFFECT_DENY
