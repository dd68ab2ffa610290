"""An act relying on several memories tests its argument rules (those reading no
`memory`) once, and decides exactly as testing every rule on every memory does."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage_dsl.compiler import CompiledPolicySet
from memlineage_dsl.decision import Decision, stricter
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import (
    Argument,
    Creator,
    DictSnapshot,
    Grant,
    Memory,
    MemoryFacts,
    Request,
    UnknownMemory,
)
from memlineage_dsl.pipeline import build_texts

SET = """\
actions money_out = ["send_money"]

policy undelegated priority 95 {
  on act
  when request.action in money_out and any(a in request.args : not covered(a))
  deny "an argument comes from a source the user did not delegate"
}

policy payee priority 75 {
  on act
  when any(a in request.args : a.name == "recipient" and granted(a))
  degrade require_confirmation("confirm the payee") score 0.7
}

policy tainted priority 90 {
  on act
  when any(a in lineage(memory) : a.creator.id == "tool:web")
  deny "relies on web output"
}

policy weak priority 40 {
  on act
  when memory.confidence < 0.5
  degrade annotate("weak") score 0.6
}
"""

CREATORS = ["user:alice", "tool:web", "tool:files", "agent:planner"]


def _compiled() -> CompiledPolicySet:
    build = build_texts({"set.mlp": SET})
    assert build.compiled is not None, [d.message for d in build.diagnostics]
    return build.compiled


COMPILED = _compiled()
PLAN = COMPILED.plans["act"]
UNSPLIT = replace(COMPILED, plans={**COMPILED.plans, "act": replace(PLAN, test_request=None)})


def test_the_argument_rules_are_split_from_the_memory_rules() -> None:
    assert PLAN.test_request is not None and PLAN.test_memory is not None
    memory_rules = SET[SET.index("policy tainted") :]  # every act rule reads `memory`
    build = build_texts({"s.mlp": memory_rules})
    assert build.compiled is not None
    assert build.compiled.plans["act"].test_request is None  # nothing to split


@settings(max_examples=150, deadline=None)
@given(
    creators=st.lists(st.sampled_from(CREATORS), min_size=2, max_size=5),
    confidences=st.lists(st.sampled_from([0.3, 0.9]), min_size=5, max_size=5),
    unknown=st.sets(st.integers(0, 4), max_size=2),
    recipient=st.lists(st.integers(0, 4), max_size=2),
    amount=st.lists(st.integers(0, 4), max_size=2),
    granted=st.booleans(),
)
def test_an_act_decides_as_every_rule_tested_on_every_memory(
    creators: list[str],
    confidences: list[float],
    unknown: set[int],
    recipient: list[int],
    amount: list[int],
    granted: bool,
) -> None:
    facts = [
        MemoryFacts(
            id=f"m{i}",
            creator=Creator.parse(c),
            confidence=confidences[i],
            dependencies=(f"m{i - 1}",) if i else (),
        )
        for i, c in enumerate(creators)
    ]
    memories: list[Memory] = [
        UnknownMemory(f.id) if i in unknown else f for i, f in enumerate(facts)
    ]
    known = [f for i, f in enumerate(facts) if i not in unknown]
    n = len(memories)

    def sources(ix: list[int]) -> tuple[Memory, ...]:
        return tuple(memories[i % n] for i in ix)

    grants = (
        (Grant("g", Creator.parse("user:alice"), ("send_money",), source="tool:*", uses=5),)
        if granted
        else ()
    )
    req = Request(
        "act",
        memories[0],
        Creator.parse("agent:planner"),
        action="send_money",
        time=100.0,
        memories=tuple(memories),
        args=(Argument("recipient", sources(recipient)), Argument("amount", sources(amount))),
        grants=grants,
    )
    split = decide(COMPILED, req, DictSnapshot(known))
    every = decide(UNSPLIT, req, DictSnapshot(known))
    assert split == every


COSTLY = """\
policy weak priority 40 {
  on act
  when memory.confidence < 0.5
  degrade annotate("weak") score 0.6
  cost 2
}

policy web priority 30 {
  on act
  when memory.creator.id == "tool:web"
  degrade annotate("web")
}
"""


def _merged(parts: list[Decision]) -> tuple[object, ...]:
    """The documented merge of per-memory decisions: the strictest effect, the least
    score, the summed cost, each obligation and reason once (first seen)."""
    effect = "allow"
    for p in parts:
        effect = stricter(effect, p.effect)
    return (
        effect,
        min(p.compliance_score for p in parts),
        sum(p.expected_cost for p in parts),
        tuple(dict.fromkeys((o.kind, o.args) for p in parts for o in p.obligations)),
        tuple(dict.fromkeys(r for p in parts for r in p.reasons)),
    )


@settings(max_examples=100, deadline=None)
@given(
    picks=st.lists(
        st.tuples(st.sampled_from(["user:alice", "tool:web"]), st.sampled_from([0.3, 0.9])),
        min_size=2,
        max_size=5,
    )
)
def test_an_act_on_several_memories_merges_their_decisions_and_sums_their_costs(
    picks: list[tuple[str, float]],
) -> None:
    """Memories alike get the same (cached) decision object: merged, the costs still add
    up (two weak memories cost 4, not 2)."""
    build = build_texts({"c.mlp": COSTLY})
    assert build.compiled is not None, [d.message for d in build.diagnostics]
    facts = [
        MemoryFacts(id=f"m{i}", creator=Creator.parse(c), confidence=conf)
        for i, (c, conf) in enumerate(picks)
    ]
    snap = DictSnapshot(facts)
    actor = Creator.parse("agent:planner")

    def on(ms: list[MemoryFacts]) -> Decision:
        req = Request("act", ms[0], actor, action="book", time=100.0, memories=tuple(ms))
        return decide(build.compiled, req, snap)  # type: ignore[arg-type]  # checked above

    whole = on(facts)
    parts = [on([f]) for f in facts]
    got = (
        whole.effect,
        whole.compliance_score,
        whole.expected_cost,
        tuple((o.kind, o.args) for o in whole.obligations),
        whole.reasons,
    )
    assert got == _merged(parts)
    assert whole.expected_cost == 2 * sum(conf < 0.5 for _, conf in picks)
