"""The Check and FilterRank responses are written straight in protobuf wire format;
it must equal the message built field by field through the generated classes —
so a change to the .proto that the hand-written encoder misses fails here."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.engine.outcomes import RankedCandidate
from memlineage.engine.records import DecisionContext, DecisionRecord
from memlineage.grpc_api import serde, wire
from memlineage.v1 import memlineage_pb2 as pb
from memlineage_dsl.decision import Decision, ObligationOut, Reason

DECISIONS = [
    Decision("allow", 1.0, 0.0),
    Decision("deny", 0.0, 0.0, reasons=(Reason("p", "deny", "no", 50, "fired"),)),
    Decision(
        "degrade",
        0.45,
        0.02,
        obligations=(
            ObligationOut("refresh", ("tool:x",), "p"),
            ObligationOut("downrank", (0.5,), "q"),
            ObligationOut("annotate", ("é 'q' \\ \n",), "r"),
            ObligationOut("mark_pending", (), "s"),
        ),
        reasons=(
            Reason("p", "degrade", "stale", 10, "fired"),
            Reason("q", "degrade", "waived", -3, "waived"),
        ),
        errors=("boom",),
    ),
]
ids = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def candidates(draw) -> RankedCandidate:
    mid = draw(ids)
    memory_ids = draw(st.sampled_from([(mid,), (mid, draw(ids)), ()]))
    rec = DecisionRecord(
        draw(ids),
        draw(st.sampled_from(DECISIONS)),
        "ns",
        draw(st.sampled_from(["read", "act", "update"])),
        memory_ids,
        "user:u",
        draw(st.floats(0, 4e9)),
        draw(st.sampled_from(["", "abc123"])),
    )
    return RankedCandidate(
        mid, draw(floats), draw(floats), draw(st.booleans()), rec, draw(floats), draw(floats)
    )


def by_fields(ranked: list[RankedCandidate]) -> pb.FilterRankResponse:
    out = pb.FilterRankResponse()
    for c in ranked:
        item = out.candidates.add(
            memory_id=c.memory_id,
            similarity=c.similarity,
            rank_score=c.rank_score,
            kept=c.kept,
            reliability=c.reliability,
            value_score=c.value_score,
        )
        serde.decision_to_pb(c.decision, item.decision)
    best = sorted((c for c in ranked if c.kept), key=lambda c: -c.rank_score)
    out.ranked_ids.extend(c.memory_id for c in best)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(candidates(), max_size=12))
def test_wire_encoding_equals_the_generated_classes(ranked) -> None:
    fast = wire.filter_rank_response(ranked)
    assert fast == by_fields(ranked)
    assert pb.FilterRankResponse.FromString(fast.SerializeToString()) == fast


@st.composite
def records(draw) -> DecisionRecord:
    return DecisionRecord(
        draw(ids),
        draw(st.sampled_from(DECISIONS)),
        "ns",
        draw(st.sampled_from(["read", "act", "update", "derive"])),
        tuple(draw(st.lists(st.one_of(ids, st.just("")), max_size=3))),
        "user:u",
        draw(st.floats(0, 4e9)),
        draw(st.sampled_from(["", "sha256:abc"])),
    )


@settings(max_examples=200, deadline=None)
@given(records())
def test_check_response_bytes_equal_the_generated_classes(rec) -> None:
    want = pb.CheckResponse()
    serde.decision_to_pb(rec, want.decision)
    assert pb.CheckResponse.FromString(wire.check_response_bytes(rec)) == want


@settings(max_examples=100, deadline=None)
@given(records(), st.lists(st.tuples(st.text(max_size=40), st.floats(0, 2**33)), max_size=4))
def test_a_remembered_answer_encodes_each_issue_like_a_fresh_one(rec, issues) -> None:
    """CheckAnswer (decision reuse): the parts shared by every issue encoded once."""
    ctx = DecisionContext(
        rec.decision, rec.namespace, rec.operation, rec.memory_ids, rec.actor, rec.policy_version
    )
    answer = wire.CheckAnswer(ctx)
    for decision_id, at in [(rec.decision_id, rec.decided_at), *issues]:
        want = pb.CheckResponse()
        serde.decision_to_pb(ctx.record(decision_id, at), want.decision)
        assert pb.CheckResponse.FromString(answer.encode(decision_id, at)) == want


@given(st.integers(-(2**63), 2**63 - 1).filter(bool))
def test_varints_are_protobufs_own(n: int) -> None:
    """The table-driven encoder writes what protobuf writes for an int64 (field 15 of
    Memory, tag 0x78; negative numbers as ten bytes of two's complement)."""
    assert b"\x78" + wire.varint(n) == pb.Memory(version=n).SerializeToString()
