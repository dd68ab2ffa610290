"""An Explain answer as W3C PROV-JSON (`memlineage explain --format prov`).

So a memory's lineage can be handed to provenance tools (ProvToolbox, the `prov`
package, a triple store) in the W3C vocabulary instead of MemLineage's own:

- each memory is an `entity` (`mem:ID`) with its lineage attributes (`ml:status`,
  `ml:version`, `ml:reliability`, its claim, tags...), generated at its `created_at`
  (`wasGeneratedBy`, no activity) and, when revoked, superseded or evicted,
  invalidated at that change (`wasInvalidatedBy`, with the reason);
- each creator is an `agent` (`creator:KIND:ID`, or `creator:KIND/ID` for an id that names
  no kind; a user is a `prov:Person`, anything
  else a `prov:SoftwareAgent`) with its credibility, and `wasAttributedTo` ties a
  memory to it;
- each lineage edge is `wasDerivedFrom` (the derived memory from its dependency);
- each earlier version (Explain's `versions`, from Revise) is an entity `mem:ID@vN`,
  and `wasRevisionOf` (a `wasDerivedFrom` of type `prov:Revision`) chains them;
- each recent decision is an `activity` (`decision:ID`, at its time, with its
  operation, effect and policy version) that `used` the memories it decided on.

Hand-written JSON (no runtime dependency): the test reads it back with the `prov`
package (`prov.read(..., format="json")`). Pure functions over the pb message.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from urllib.parse import quote

from google.protobuf.timestamp_pb2 import Timestamp

from memlineage.graph_export import status_name
from memlineage.v1 import memlineage_pb2 as pb

__all__ = ["to_prov", "to_prov_json"]

VOCABULARY = "urn:memlineage:vocabulary#"
# Statuses that end a memory's validity: PROV's invalidation.
_INVALIDATING = {"revoked", "superseded", "evicted"}


def _qname(value: str) -> dict[str, str]:
    return {"$": value, "type": "xsd:QName"}


def _time(ts: Timestamp) -> str:
    at = dt.datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, dt.UTC)
    return at.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _local(text: str) -> str:
    """A QName's local part: ids are [A-Za-z0-9._:/-] already; anything else is
    percent-encoded."""
    return quote(text, safe="-._:/")


class _Doc:
    """A PROV-JSON document being built: records by kind, relations with generated ids."""

    def __init__(self, namespace: str) -> None:
        self.doc: dict[str, Any] = {
            "prefix": {
                "ml": VOCABULARY,
                "mem": f"urn:memlineage:memory:{_local(namespace)}/",
                "creator": "urn:memlineage:creator:",
                "decision": "urn:memlineage:decision:",
            }
        }
        self._count = 0

    def record(self, kind: str, ident: str, attributes: dict[str, Any]) -> None:
        self.doc.setdefault(kind, {}).setdefault(ident, {}).update(attributes)

    def relation(self, kind: str, attributes: dict[str, Any]) -> None:
        self._count += 1
        self.doc.setdefault(kind, {})[f"_:{kind}{self._count}"] = attributes


def _memory_id(memory_id: str, version: int | None = None) -> str:
    # `@` is never in an id (check_id), so `mem:ID@vN` names a version unambiguously.
    return f"mem:{_local(memory_id)}" + (f"@v{version}" if version is not None else "")


def _creator_id(creator_id: str, kind: str = "") -> str:
    """`creator:ID` for an id that names its kind (`user:alice`); one that names none
    is `creator:KIND/ID`, so `(user, "alice")` and `(tool, "alice")` stay two agents
    (before: merged, the user's memory attributed to a tool; an outside audit). A
    source's statistics, which carry no kind, go to `creator:ID`."""
    if kind and not creator_id.startswith(f"{kind}:"):
        return f"creator:{kind}/{_local(creator_id)}"
    return f"creator:{_local(creator_id)}"


def _attributes(m: pb.Memory) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prov:type": _qname("ml:Memory"),
        "prov:label": m.id,
        "ml:type": m.type,
        "ml:status": status_name(m.status),
        "ml:version": m.version,
        "ml:confidence": m.creator_confidence if m.HasField("creator_confidence") else 1.0,
        "ml:reliability": m.reliability,
        "ml:valueScore": m.value_score,
        "ml:accessCount": m.access_count,
    }
    if m.volatility:
        out["ml:volatility"] = m.volatility
    if m.tags:
        out["ml:tag"] = list(m.tags)
    if m.HasField("claim"):
        out["ml:claimSubject"] = m.claim.subject
        out["ml:claimAttribute"] = m.claim.attribute
        out["ml:claimValue"] = m.claim.value
    if m.context_id:
        out["ml:contextId"] = m.context_id
    if m.successor:
        out["ml:successor"] = _qname(_memory_id(m.successor))
    return out


def _add_memory(doc: _Doc, m: pb.Memory, ident: str) -> None:
    """The memory's entity, its creator's agent, attribution, generation, invalidation."""
    doc.record("entity", ident, _attributes(m))
    if m.creator.id:
        kind = pb.CreatorKind.Name(m.creator.kind).removeprefix("CREATOR_KIND_").lower()
        agent = _creator_id(m.creator.id, kind)
        person = kind == "user"
        doc.record(
            "agent",
            agent,
            {
                "prov:type": _qname("prov:Person" if person else "prov:SoftwareAgent"),
                "prov:label": m.creator.id,
                "ml:kind": kind,
            },
        )
        doc.relation("wasAttributedTo", {"prov:entity": ident, "prov:agent": agent})
    if m.HasField("created_at"):
        doc.relation("wasGeneratedBy", {"prov:entity": ident, "prov:time": _time(m.created_at)})
    for change in m.history:
        if status_name(change.to_status) in _INVALIDATING and change.HasField("at"):
            ended: dict[str, Any] = {"prov:entity": ident, "prov:time": _time(change.at)}
            ended["ml:status"] = status_name(change.to_status)
            if change.reason:
                ended["ml:reason"] = change.reason
            if change.root_id and change.root_id != m.id:
                ended["ml:cascadeFrom"] = _qname(_memory_id(change.root_id))
            doc.relation("wasInvalidatedBy", ended)


def _versions(resp: pb.ExplainResponse) -> list[pb.Memory]:
    """Earlier versions, newest first; none from a sidecar whose Explain has no such field."""
    if "versions" not in resp.DESCRIPTOR.fields_by_name:
        return []
    return list(resp.versions)


def to_prov(resp: pb.ExplainResponse) -> dict[str, Any]:
    """The PROV-JSON document (a dict) of an Explain answer."""
    doc = _Doc(resp.memory.namespace or "default")
    loaded = [resp.memory, *resp.ancestors, *resp.descendants]
    for m in loaded:
        if m.id:
            _add_memory(doc, m, _memory_id(m.id))
    for a, b in dict.fromkeys((e.from_id, e.to_id) for e in resp.edges):
        for end in (a, b):  # an end the answer did not load is still named
            doc.record("entity", _memory_id(end), {"prov:label": end})
        doc.relation(
            "wasDerivedFrom",
            {"prov:generatedEntity": _memory_id(b), "prov:usedEntity": _memory_id(a)},
        )
    newer = _memory_id(resp.memory.id)
    for old in _versions(resp):
        ident = _memory_id(old.id or resp.memory.id, old.version)
        _add_memory(doc, old, ident)
        doc.relation(
            "wasDerivedFrom",
            {
                "prov:generatedEntity": newer,
                "prov:usedEntity": ident,
                "prov:type": _qname("prov:Revision"),
            },
        )
        newer = ident
    for s in resp.sources:
        doc.record(
            "agent",
            _creator_id(s.source),
            {"prov:label": s.source, "ml:credibility": s.credibility},
        )
    entities = doc.doc.get("entity", {})
    # each version of the explained memory by its time: a decision used the one it met
    # (before: every decision `used` the current one; an outside audit)
    dated = sorted(
        (m.created_at.seconds + m.created_at.nanos / 1e9, ident)
        for m, ident in (
            (resp.memory, _memory_id(resp.memory.id)),
            *((old, _memory_id(old.id or resp.memory.id, old.version)) for old in _versions(resp)),
        )
        if resp.memory.id and m.HasField("created_at")
    )
    for d in resp.decisions:
        ident = f"decision:{_local(d.decision_id)}"
        activity: dict[str, Any] = {
            "prov:type": _qname("ml:Decision"),
            "ml:operation": pb.Operation.Name(d.operation).removeprefix("OPERATION_").lower(),
            "ml:effect": pb.Effect.Name(d.effect).removeprefix("EFFECT_").lower(),
            "ml:complianceScore": d.compliance_score,
            "ml:policyVersion": d.policy_version,
        }
        if d.HasField("decided_at"):
            activity["prov:startTime"] = activity["prov:endTime"] = _time(d.decided_at)
        if d.reasons:
            activity["ml:policy"] = [r.policy for r in d.reasons]
        doc.record("activity", ident, activity)
        at = d.decided_at.seconds + d.decided_at.nanos / 1e9 if d.HasField("decided_at") else None
        for memory_id in d.memory_ids:
            entity = _memory_id(memory_id)
            if memory_id == resp.memory.id and dated and at is not None:
                entity = _version_at(dated, at)
            if entity in entities:
                doc.relation("used", {"prov:activity": ident, "prov:entity": entity})
    return doc.doc


def _version_at(dated: list[tuple[float, str]], at: float) -> str:
    """The entity of the newest version made at or before `at` (a decision taken just
    before its own write's record: the oldest)."""
    entity = dated[0][1]
    for created, ident in dated:
        if created > at:
            break
        entity = ident
    return entity


def to_prov_json(resp: pb.ExplainResponse) -> str:
    """`to_prov` as indented JSON text, one trailing newline."""
    return json.dumps(to_prov(resp), indent=2, ensure_ascii=False) + "\n"
