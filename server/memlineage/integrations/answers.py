"""What the adapters hand back with a degraded memory: its decision as plain
JSON-able values under `DECISION_KEY` (the obligations alike in every adapter), and
Mem0's shown items and history (the LangGraph store's are in `langgraph_store`)."""

from __future__ import annotations

from typing import Any

from memlineage.v1 import memlineage_pb2 as pb

DECISION_KEY = "_memlineage"
"""The key under which a degraded item's decision is returned; never stored."""


def obligations_of(decision: pb.Decision) -> list[dict[str, Any]]:
    """The decision's obligations as plain values (what a caller must honour)."""
    return [
        {"kind": o.kind, "text": o.text, "source": o.source, "factor": o.factor, "policy": o.policy}
        for o in decision.obligations
    ]


def mem0_decision(decision: pb.Decision) -> dict[str, Any]:
    """A decision as a returned Mem0 memory carries it under `DECISION_KEY`."""
    return {
        "effect": pb.Effect.Name(decision.effect).removeprefix("EFFECT_").lower(),
        "decision_id": decision.decision_id,
        "compliance_score": decision.compliance_score,
        "obligations": obligations_of(decision),
        "reasons": [
            {"policy": r.policy, "message": r.message, "effect": pb.Effect.Name(r.effect)}
            for r in decision.reasons
        ],
    }


def mem0_shown(item: dict[str, Any], decision: pb.Decision) -> dict[str, Any] | None:
    """A read's answer: None when denied, a copy with the decision when degraded."""
    if decision.effect == pb.EFFECT_DENY:
        return None
    if decision.effect == pb.EFFECT_DEGRADE:
        return {**item, DECISION_KEY: mem0_decision(decision)}
    return item


def mem0_history(entries: Any, decision: pb.Decision) -> list[Any]:
    """`history`'s answer: the entries a read decision lets through (`mem0_shown`
    each), with only the current text: the decision is on the memory as it is now, so
    the texts of earlier versions (``old_memory``, and ``new_memory`` before the last
    entry) are left out (before: one allowed rewrite showed the hidden text it
    replaced; an outside audit)."""
    out: list[Any] = []
    listed = [dict(e) for e in entries or ()]
    for k, e in enumerate(listed):
        if "old_memory" in e:
            e["old_memory"] = None
        if k < len(listed) - 1 and "new_memory" in e:
            e["new_memory"] = None
        shown = mem0_shown(e, decision)
        if shown is not None:
            out.append(shown)
    return out
