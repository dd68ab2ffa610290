"""Through a real sidecar (lineage_depth 3, the bundled policies) and the client: a
chain of notes on web output one derivation deeper than the sidecar loads is not read,
ranked, acted on or derived from (fail closed, naming lineage_depth), where before its
walks stopped at the depth and the web source went unseen; a chain within the depth
is decided as before. A dangling dependency at the depth is passed over as within it,
and a Record decides on its claim holder's lineage, bounded the same way."""

from __future__ import annotations

from pathlib import Path

from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.lineage.clock import ManualClock
from memlineage.v1 import memlineage_pb2 as pb
from support.memories import T0
from support.redis_servers import RedisServer
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

DEPTH = 3
PAST = f"goes deeper than the lineage_depth ({DEPTH}) loaded for this decision"


def _past(d: pb.Decision) -> bool:
    return d.effect == pb.EFFECT_DENY and any(
        PAST in e and "raise lineage_depth" in e for e in d.errors
    )


def test_a_chain_past_the_served_depth_fails_closed() -> None:
    config = Config(policy_dir=BUNDLED_POLICIES, decision_log="off", lineage_depth=DEPTH)
    with (
        RunningSidecar(config, ManualClock(T0)) as s,
        MemLineageClient(s.address, timeout=10) as c,
    ):
        assert c.record("w0", creator="tool:web_search", type="tool_result").recorded
        for i in range(1, DEPTH + 2):  # w4: 4 derivations up, its lineage one past 3
            note = c.record(f"w{i}", creator="agent:assistant", dependencies=[f"w{i - 1}"])
            assert note.recorded, note.decision
        within, past = f"w{DEPTH}", f"w{DEPTH + 1}"

        read = c.check("read", past)
        assert _past(read), read
        assert f"the lineage of `{past}`" in read.errors[0]
        assert c.check("read", past).errors == read.errors  # never kept: decided again
        assert c.check("read", within).effect != pb.EFFECT_DENY

        ranked = {r.memory_id: r for r in c.filter_rank([(past, 0.9), (within, 0.8)]).candidates}
        assert not ranked[past].kept and _past(ranked[past].decision)
        assert ranked[within].kept and not ranked[within].decision.errors

        act = c.act("book_hotel", relies_on=[past])
        assert _past(act), act
        acted = c.act("book_hotel", relies_on=[within])  # the web source is seen
        assert acted.effect == pb.EFFECT_DENY and not acted.errors
        assert "untrusted_lineage_cannot_act" in {r.policy for r in acted.reasons}

        derived = c.record("w-next", creator="agent:assistant", dependencies=[past])
        assert not derived.recorded and _past(derived.decision), derived.decision


def test_a_dangling_dependency_at_the_served_depth_is_passed_over(
    redis_server: RedisServer,
) -> None:
    """On a damaged store (a memory's record gone, its dependants still naming it) the
    dangling id one past the depth is passed over, as it is within the depth; a stored
    one there is still a cut."""
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        store=redis_server.emptied(),
        decision_log="off",
        lineage_depth=DEPTH,
    )
    with (
        RunningSidecar(config, ManualClock(T0)) as s,
        MemLineageClient(s.address, timeout=10) as c,
    ):
        for prefix in ("b", "c"):
            assert c.record(f"{prefix}0", creator="user:alice").recorded
            for i in range(1, DEPTH + 2):
                note = c.record(
                    f"{prefix}{i}", creator="agent:assistant", dependencies=[f"{prefix}{i - 1}"]
                )
                assert note.recorded, note.decision
        raw = redis_server.client()
        try:
            assert raw.delete("ml:{default}:m:b0") == 1
        finally:
            raw.close()
        at, within = c.check("read", f"b{DEPTH + 1}"), c.check("read", f"b{DEPTH}")
        assert at.effect == within.effect == pb.EFFECT_ALLOW, (at, within)
        assert not at.errors
        assert _past(c.check("read", f"c{DEPTH + 1}"))  # undamaged: past the depth


HOLDER_RULE = """
policy rests_on_the_user priority 100 {
  on write, derive
  when target.id != memory.id and memory.creator.kind != user
    and any(a in ancestors(target) : a.creator.kind == user)
  deny "a claim resting on what the user stated is replaced by the user only"
}
"""


def test_a_record_decides_on_the_served_holders_lineage(tmp_path: Path) -> None:
    """A write rule walking the claim holder's ancestors sees them (before: a
    fail-closed deny, "not loaded", on any holder with lineage), and past the depth
    fails closed naming it."""
    (tmp_path / "rule.mlp").write_text(HOLDER_RULE)
    config = Config(policy_dir=str(tmp_path), decision_log="off", lineage_depth=DEPTH)
    with (
        RunningSidecar(config, ManualClock(T0)) as s,
        MemLineageClient(s.address, timeout=10) as c,
    ):
        assert c.record("said", creator="user:alice").recorded
        assert c.record("planner", creator="agent:planner").recorded
        held = c.record(
            "h",
            creator="agent:assistant",
            dependencies=["said"],
            claim=("user:alice", "city", "Paris"),
        )
        assert held.recorded
        over = c.record("w", creator="agent:assistant", claim=("user:alice", "city", "Rome"))
        assert not over.recorded and not over.decision.errors, over.decision
        assert "rests_on_the_user" in {r.policy for r in over.decision.reasons}
        assert c.record(
            "k",
            creator="agent:assistant",
            dependencies=["planner"],
            claim=("user:bob", "city", "Oslo"),
        ).recorded
        moved = c.record("k2", creator="agent:assistant", claim=("user:bob", "city", "Bergen"))
        assert moved.recorded and not moved.decision.errors, moved.decision
        for i in range(1, DEPTH + 1):
            prev = "planner" if i == 1 else f"p{i - 1}"
            assert c.record(f"p{i}", creator="agent:assistant", dependencies=[prev]).recorded
        deep = c.record(
            "d",
            creator="agent:assistant",
            dependencies=[f"p{DEPTH}"],
            claim=("user:carol", "city", "Kyiv"),
        )
        assert deep.recorded, deep.decision
        past = c.record("d2", creator="agent:assistant", claim=("user:carol", "city", "Lviv"))
        assert not past.recorded and _past(past.decision), past.decision
