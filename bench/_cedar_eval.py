"""The Cedar side of `eval_bench.py`: the same 5 rules as a Cedar policy set.

Kept apart so the MemLineage bench never imports cedarpy unless it is installed
(`pip install -e '.[bench]'`).

Model:
- principal: `User::"<id>"` or `Agent::"<id>"` (every non-user creator kind),
  with attribute `kind`;
- resource: `Memory::"<id>"` with `creator_kind`, `confidence` (decimal),
  `tags` (Set<String>), `created_at` (Long, seconds);
- lineage: a memory's parents are `Node::"<dep>"` proxies of its direct
  dependencies; `Node::"<x>"` has the proxies of x's dependencies as parents
  and, when x is revoked, also `Status::"revoked"`. So
  `resource in Status::"revoked"` holds exactly when some *strict* ancestor is
  revoked (a revoked memory is not its own ancestor), computed by Cedar's own
  hierarchy (transitive closure at entity load), not precomputed by the bench;
- context: `now` (Long, seconds).
"""

from __future__ import annotations

import cedarpy
from memlineage_dsl.facts import MemoryFacts, Request

POLICIES = """\
permit (principal, action, resource);

@id("low_confidence_reasoning")
forbid (principal, action == Action::"read", resource)
when { resource.creator_kind == "reasoning" && resource.confidence.lessThan(decimal("0.7")) };

@id("stale_flight_price")
forbid (principal, action == Action::"read", resource)
when { resource.tags.contains("flight_price") && context.now - resource.created_at > 3600 };

@id("user_statements_protected")
forbid (principal, action in [Action::"update", Action::"delete"], resource)
when { resource.creator_kind == "user" && principal.kind != "user" };

@id("revoked_ancestor")
forbid (principal, action == Action::"read", resource in Status::"revoked");
"""


def principal_uid(kind: str, ident: str) -> dict[str, str]:
    return {"type": "User" if kind == "user" else "Agent", "id": ident}


def entities_json(memories: list[MemoryFacts], actors: list[tuple[str, str]]) -> list[dict]:
    """The Cedar entity list for the workload's memories and actors."""
    out: list[dict] = [{"uid": {"type": "Status", "id": "revoked"}, "attrs": {}, "parents": []}]
    for kind, ident in actors:
        out.append({"uid": principal_uid(kind, ident), "attrs": {"kind": kind}, "parents": []})
    for m in memories:
        deps = [{"type": "Node", "id": d} for d in m.dependencies]
        out.append(
            {
                "uid": {"type": "Memory", "id": m.id},
                "attrs": {
                    "creator_kind": m.creator.kind,
                    "confidence": {"__extn": {"fn": "decimal", "arg": f"{m.confidence:.4f}"}},
                    "tags": list(m.tags),
                    "created_at": int(m.created_at),
                },
                "parents": deps,
            }
        )
        node_parents = list(deps)
        if m.status == "revoked":
            node_parents.append({"type": "Status", "id": "revoked"})
        out.append({"uid": {"type": "Node", "id": m.id}, "attrs": {}, "parents": node_parents})
    return out


def cedar_request(req: Request) -> dict:
    target = req.target if req.target is not None else req.memory
    return {
        "principal": principal_uid(req.actor.kind, req.actor.id),
        "action": {"type": "Action", "id": req.op},
        "resource": {"type": "Memory", "id": target.id},
        "context": {"now": int(req.time)},
    }


class CedarEngine:
    """Policies and entities parsed once into cedarpy handles (its fastest per-call form)."""

    def __init__(self, memories: list[MemoryFacts], actors: list[tuple[str, str]]) -> None:
        self.policy_text = POLICIES
        self.entity_list = entities_json(memories, actors)
        self.policies = cedarpy.PolicySet.from_str(POLICIES)
        self.entities = cedarpy.Entities.from_json_str(_dumps(self.entity_list))

    def is_authorized(self, request: dict) -> cedarpy.AuthzResult:
        return cedarpy.is_authorized(request, self.policies, self.entities)

    def is_authorized_unprepared(self, request: dict) -> cedarpy.AuthzResult:
        """Policy text and entity list passed as-is: parsed again on every call."""
        return cedarpy.is_authorized(request, self.policy_text, self.entity_list)

    def is_authorized_batch(self, requests: list[dict]) -> list[cedarpy.AuthzResult]:
        return cedarpy.is_authorized_batch(requests, self.policies, self.entities)


def forbids(result: cedarpy.AuthzResult) -> frozenset[str]:
    """The @id of every forbid policy that determined a deny."""
    if result.allowed:
        return frozenset()
    ids = result.diagnostics.id_annotations_by_reason
    return frozenset(ids.get(r, r) for r in result.diagnostics.reasons)


def _dumps(obj: object) -> str:
    import json

    return json.dumps(obj)
