"""proto <-> domain conversion, in one place (Flower's `serde`)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sized
from typing import Any, cast

from google.protobuf.message import DecodeError, Message
from google.protobuf.timestamp_pb2 import Timestamp
from memlineage_dsl.decision import Decision
from memlineage_dsl.diagnostics import Diagnostic
from memlineage_dsl.facts import Creator

from memlineage.engine.acts import ActArgument
from memlineage.engine.outcomes import Explanation
from memlineage.engine.policies import ServingPolicies
from memlineage.engine.records import DecisionRecord
from memlineage.engine.shadow import ShadowStatus
from memlineage.lifecycle.sweep import SweepReport
from memlineage.lineage.errors import ValidationError
from memlineage.lineage.grants import GrantRecord
from memlineage.lineage.model import LineageEvent, MemoryRecord
from memlineage.lineage.proposals import Proposal
from memlineage.lineage.validation import check_creator, check_id, check_one_line
from memlineage.store.arguments import MAX_BATCH_IDS
from memlineage.v1 import memlineage_pb2 as pb

EFFECT_TO_PB = {"allow": pb.EFFECT_ALLOW, "deny": pb.EFFECT_DENY, "degrade": pb.EFFECT_DEGRADE}
OP_FROM_PB: dict[int, str] = {
    pb.OPERATION_READ: "read",
    pb.OPERATION_WRITE: "write",
    pb.OPERATION_UPDATE: "update",
    pb.OPERATION_DELETE: "delete",
    pb.OPERATION_DERIVE: "derive",
    pb.OPERATION_ACT: "act",
}
OP_TO_PB: dict[str, pb.Operation] = {v: cast(pb.Operation, k) for k, v in OP_FROM_PB.items()}
KIND_FROM_PB = {
    pb.CREATOR_KIND_USER: "user",
    pb.CREATOR_KIND_TOOL: "tool",
    pb.CREATOR_KIND_REASONING: "reasoning",
    pb.CREATOR_KIND_AGENT: "agent",
    pb.CREATOR_KIND_SYSTEM: "system",
}
KIND_TO_PB = {v: k for k, v in KIND_FROM_PB.items()}
STATUS_TO_PB = {
    "active": pb.STATUS_ACTIVE,
    "pending_verification": pb.STATUS_PENDING_VERIFICATION,
    "revoked": pb.STATUS_REVOKED,
    "superseded": pb.STATUS_SUPERSEDED,
    "archived": pb.STATUS_ARCHIVED,
    "compressed": pb.STATUS_COMPRESSED,
    "evicted": pb.STATUS_EVICTED,
}
STATUS_ACTION_FROM_PB = {
    pb.STATUS_ACTION_REVOKE: "revoke",
    pb.STATUS_ACTION_SUPERSEDE: "supersede",
    pb.STATUS_ACTION_CONFIRM: "confirm",
    pb.STATUS_ACTION_COMPRESS: "compress",
}


# Record fields the store validates (its error `field`s) -> where the request has
# them inside `memory` (a Memory message nests the claim and the creator).
RECORD_FIELDS = {
    **{
        name: name
        for name in (
            "id",
            "type",
            "tags",
            "volatility",
            "creator_confidence",
            "created_at",
            "context_id",
            "dependencies",
            "status",
        )
    },
    "subject": "claim.subject",
    "attribute": "claim.attribute",
    "value": "claim.value",
    "creator_kind": "creator.kind",
    "creator_id": "creator.id",
}


def memory_field(field: str | None) -> str | None:
    """A store error's field of a proposed record as the request names it
    (`tags[3]` -> `memory.tags[3]`, `value` -> `memory.claim.value`), or None when the
    field is not one of the record's."""
    if not field:
        return None
    head = field.split("[")[0].split(".")[0]
    where = RECORD_FIELDS.get(head)
    return None if where is None else f"memory.{where}{field[len(head) :]}"


# ------------------------------------------------------------------ time
def to_ts(seconds: float, ts: Timestamp) -> None:
    whole = math.floor(seconds)
    nanos = round((seconds - whole) * 1e9)
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    ts.seconds = whole
    ts.nanos = nanos


# The range of google.protobuf.Timestamp that request times may use: from the Unix
# epoch (the store keeps no earlier time) to the Timestamp's own end, 9999-12-31.
MAX_TIMESTAMP_SECONDS = 253_402_300_799


def from_ts(msg: Message, name: str, field: str | None = None) -> float | None:
    """The float epoch seconds of an optional Timestamp field, None when unset; an
    out-of-range part is the caller's error, named `{field}.seconds` / `.nanos`
    (`field` defaults to `name`: the request's own path to the Timestamp)."""
    if not msg.HasField(name):
        return None
    ts: Timestamp = getattr(msg, name)
    where = field or name
    if not 0 <= ts.nanos <= 999_999_999:
        raise ValidationError(f"must be in [0, 999999999], got {ts.nanos}", field=f"{where}.nanos")
    if ts.seconds < 0:
        raise ValidationError(
            f"must be >= 0 (no time before 1970-01-01T00:00:00Z), got {ts.seconds}",
            field=f"{where}.seconds",
        )
    if ts.seconds > MAX_TIMESTAMP_SECONDS:
        raise ValidationError(
            f"must be at most {MAX_TIMESTAMP_SECONDS} (9999-12-31T23:59:59Z), got {ts.seconds}",
            field=f"{where}.seconds",
        )
    return float(ts.seconds + ts.nanos / 1e9)


# ------------------------------------------------------------------ inputs
def ids(values: Iterable[str], field: str, *, indexed: bool = True) -> list[str]:
    """Validate request ids under the request's own field names (`memory_ids[2]`),
    before the store would name them after its parameters; a list names at most
    `MAX_BATCH_IDS` ids (duplicates included: the store's limit, counted as sent)."""
    out = list(values)
    count(out, field, "ids")
    for i, value in enumerate(out):
        check_id(value, f"{field}[{i}]" if indexed else field)
    return out


def count(values: Sized, field: str, what: str, limit: int = MAX_BATCH_IDS) -> None:
    """At most `limit` entries in the repeated request field `field`."""
    if len(values) > limit:
        raise ValidationError(f"has {len(values)} {what}, the limit is {limit}", field=field)


def text(value: str, field: str, max_length: int) -> str:
    """A short free-text request field: bounded, without control characters."""
    if len(value) > max_length:
        raise ValidationError(
            f"is {len(value)} characters long, the limit is {max_length}", field=field
        )
    return check_one_line(value, field)


def decision_id(value: str) -> str:
    """Feedback's `decision_id`: empty (no decision named), or id-shaped. The ids a
    sidecar issues (`engine.records.decision_id_of`: `d<ms>-<prefix>-<masked serial>`, hex)
    are; so is any id of at most 128 of `[A-Za-z0-9._:/-]`, which the engine takes
    for a decision it does not know (another sidecar's, or one its journal has
    let go) and reports on the request's `memory_ids` alone."""
    return check_id(value, "decision_id") if value else value


def depth(value: int, field: str, maximum: int) -> int:
    """A walk depth or count: 0 (the default) to `maximum`."""
    if not 0 <= value <= maximum:
        raise ValidationError(
            f"must be an integer in [0, {maximum}] (0: the default), got {value}", field=field
        )
    return value


# Many ids in one pass: each one 1..128 allowed characters, "\n"-terminated.
_IDS_RE = re.compile(r"(?:[A-Za-z0-9._:/-]{1,128}\n)*")


def candidate_ids(values: list[str], field: str) -> list[str]:
    """`ids(..., indexed=False)` of every `values[i]` under `{field}[i]...`-style names,
    checked in one regex pass; the per-id check names the first bad one."""
    text = "\n".join(values)
    if values and (text.count("\n") != len(values) - 1 or not _IDS_RE.fullmatch(text + "\n")):
        for i, value in enumerate(values):
            check_id(value, field.format(i))
    return values


def parse(message_class: Any, data: bytes) -> Any:
    """A request the servicer receives as bytes, parsed; bytes that are not such a
    message are the caller's error (INVALID_ARGUMENT), not the server's."""
    try:
        return message_class.FromString(data)
    except DecodeError as exc:
        raise ValidationError(
            f"is not a valid {message_class.DESCRIPTOR.full_name} message ({exc})", field="request"
        ) from exc


def operation(value: int) -> str:
    op = OP_FROM_PB.get(value)
    if op is None:
        raise ValidationError(f"unknown or unset operation ({value})", field="operation")
    return op


def actor(msg: pb.Actor, default: Creator, field: str = "actor") -> Creator:
    if msg.kind == pb.CREATOR_KIND_UNSPECIFIED and not msg.id:
        return default
    kind = KIND_FROM_PB.get(msg.kind)
    if kind is None:
        raise ValidationError(
            "kind must be user, tool, reasoning, agent or system", field=f"{field}.kind"
        )
    check_id(msg.id, f"{field}.id")
    check_creator(kind, msg.id, f"{field}.id")
    return Creator(kind, msg.id)


def budget(
    msg: pb.CheckRequest | pb.FilterRankRequest | pb.RecordRequest | pb.ReviseRequest,
) -> float | None:
    return msg.budget if msg.HasField("budget") else None


def record_from_pb(namespace: str, m: pb.Memory) -> MemoryRecord:
    """A proposed record; the store validates ids, limits, confidence and time."""
    kind = KIND_FROM_PB.get(m.creator.kind)
    if kind is None:
        raise ValidationError(
            "kind must be user, tool, reasoning, agent or system", field="memory.creator.kind"
        )
    check_id(m.creator.id, "memory.creator.id")
    check_creator(kind, m.creator.id, "memory.creator.id")
    claim = m.claim if m.HasField("claim") else None
    return MemoryRecord(
        id=m.id,
        namespace=namespace,
        type=m.type or "fact",
        tags=tuple(m.tags),
        subject=(claim.subject or None) if claim else None,
        attribute=(claim.attribute or None) if claim else None,
        value=claim.value if claim else None,
        volatility=m.volatility or None,
        creator_kind=kind,
        creator_id=m.creator.id,
        creator_confidence=m.creator_confidence if m.HasField("creator_confidence") else 1.0,
        created_at=from_ts(m, "created_at", "memory.created_at"),
        context_id=m.context_id or None,
        dependencies=tuple(m.dependencies),
    )


# ------------------------------------------------------------------ outputs
def memory_to_pb(
    rec: MemoryRecord,
    out: pb.Memory | None = None,
    *,
    reliability: float | None = None,
    value: float | None = None,
) -> pb.Memory:
    m = out if out is not None else pb.Memory()
    if reliability is not None:
        m.reliability = reliability
    if value is not None:
        m.value_score = value
    m.confirmed_by.extend(rec.confirmed_by)
    m.contradicted_by.extend(rec.contradicted_by)
    m.uses_ok = rec.uses_ok
    m.uses_failed = rec.uses_failed
    m.id = rec.id
    m.namespace = rec.namespace
    m.type = rec.type
    m.tags.extend(rec.tags)
    if rec.subject is not None or rec.attribute is not None:
        m.claim.subject = rec.subject or ""
        m.claim.attribute = rec.attribute or ""
        m.claim.value = rec.value or ""
    m.volatility = str(rec.volatility or "")
    m.creator.kind = KIND_TO_PB.get(rec.creator_kind, pb.CREATOR_KIND_UNSPECIFIED)
    m.creator.id = rec.creator_id
    m.creator_confidence = rec.creator_confidence
    if rec.created_at is not None:
        to_ts(rec.created_at, m.created_at)
    m.context_id = rec.context_id or ""
    m.dependencies.extend(str(getattr(d, "id", d)) for d in rec.dependencies)
    m.derivations.extend(rec.derivations)
    m.status = STATUS_TO_PB.get(rec.status, pb.STATUS_UNSPECIFIED)
    m.successor = rec.successor or ""
    m.version = rec.version
    m.access_count = rec.access_count
    if rec.last_access is not None:
        to_ts(rec.last_access, m.last_access)
    for change in rec.status_history:
        h = m.history.add()
        to_ts(change.at, h.at)
        h.from_status = STATUS_TO_PB.get(change.from_status, pb.STATUS_UNSPECIFIED)
        h.to_status = STATUS_TO_PB.get(change.to_status, pb.STATUS_UNSPECIFIED)
        h.reason = change.reason
        h.root_id = change.root_id or ""
    return m


def verdict_to_pb(d: Decision) -> pb.Decision:
    """The fields of a pb.Decision that come from the evaluator's Decision alone."""
    msg = pb.Decision(
        effect=EFFECT_TO_PB[d.effect],
        compliance_score=d.compliance_score,
        expected_cost=d.expected_cost,
        errors=list(d.errors),
    )
    for o in d.obligations:
        ob = msg.obligations.add(kind=o.kind, policy=o.policy)
        arg = o.args[0] if o.args else None
        if o.kind == "refresh":
            ob.source = str(arg)
        elif o.kind == "downrank":
            ob.factor = float(arg)  # type: ignore[arg-type]  # the checker types downrank(number)
        elif arg is not None:
            ob.text = str(arg)
    for r in d.reasons:
        msg.reasons.add(
            policy=r.policy,
            effect=EFFECT_TO_PB[r.effect],
            message=r.message,
            priority=r.priority,
            status=r.status,
        )
    return msg


def decision_to_pb(rec: DecisionRecord, out: pb.Decision | None = None) -> pb.Decision:
    msg = out if out is not None else pb.Decision()
    msg.MergeFrom(verdict_to_pb(rec.decision))
    msg.decision_id = rec.decision_id
    msg.operation = OP_TO_PB[rec.operation]
    msg.memory_ids.extend(rec.memory_ids)
    to_ts(rec.decided_at, msg.decided_at)
    msg.policy_version = rec.policy_version
    msg.grants_used.extend(rec.grants_used)
    return msg


def arguments(values: Iterable[pb.ActArgument]) -> list[ActArgument]:
    """An act's arguments as the engine takes them (it checks names and ids)."""
    return [ActArgument(a.name, tuple(a.sources), a.value, a.digest) for a in values]


def grant_from_pb(namespace: str, g: pb.Grant, now_field: str = "grant") -> GrantRecord:
    """The grant a caller records (the store checks and completes it)."""
    expires = from_ts(g, "expires_at", f"{now_field}.expires_at")
    return GrantRecord(
        id=g.id,
        namespace=namespace,
        issuer="",
        actions=tuple(g.actions),
        arguments=tuple(g.arguments),
        source=g.source,
        memory_id=g.memory_id,
        uses=_grant_uses(g.uses),
        expires_at=math.inf if expires is None else expires,
        value=g.value,
        digest=g.digest,
    )


def _grant_uses(uses: int) -> int:
    if uses < 0:
        raise ValidationError("must be >= 0 (0 means one use)", field="grant.uses")
    return uses


def grant_to_pb(g: GrantRecord, now: float, out: pb.Grant | None = None) -> pb.Grant:
    msg = out if out is not None else pb.Grant()
    msg.id = g.id
    msg.actions.extend(g.actions)
    msg.arguments.extend(g.arguments)
    msg.source = g.source
    msg.memory_id = g.memory_id
    msg.uses = g.uses
    msg.used = g.used
    if math.isfinite(g.expires_at):
        to_ts(g.expires_at, msg.expires_at)
    kind, _, _ = g.issuer.partition(":")
    msg.issuer.kind = KIND_TO_PB.get(kind, pb.CREATOR_KIND_UNSPECIFIED)
    msg.issuer.id = g.issuer
    to_ts(g.created_at, msg.created_at)
    msg.effective = g.effective(now)
    msg.value = g.value
    msg.digest = g.digest
    return msg


def event_to_pb(e: LineageEvent) -> pb.LineageEvent:
    msg = pb.LineageEvent(
        cursor=e.cursor,
        type=e.type,
        memory_id=e.memory_id,
        root_id=e.root_id or "",
        status=STATUS_TO_PB.get(e.status or "", pb.STATUS_UNSPECIFIED),
        previous_status=STATUS_TO_PB.get(e.previous_status or "", pb.STATUS_UNSPECIFIED),
        reason=e.reason or "",
        successor=e.successor or "",
        affected_ids=list(e.affected),
        version=e.version or 0,
    )
    to_ts(e.at, msg.at)
    if e.deadline is not None:
        to_ts(e.deadline, msg.deadline)
    return msg


def proposal_to_pb(p: Proposal, left: int, out: pb.Proposal | None = None) -> pb.Proposal:
    msg = out if out is not None else pb.Proposal()
    msg.from_status = STATUS_TO_PB.get(p.from_status, pb.STATUS_UNSPECIFIED)
    msg.to_status = STATUS_TO_PB.get(p.to_status, pb.STATUS_UNSPECIFIED)
    msg.reason = p.reason
    msg.owners.extend(p.owners)
    to_ts(p.proposed_at, msg.proposed_at)
    to_ts(p.deadline, msg.deadline)
    msg.state = p.state
    for o in p.objections:
        to_ts(o.at, msg.objections.add(by=o.by, reason=o.reason).at)
    msg.objections_left = left
    return msg


def explain_to_pb(ex: Explanation) -> pb.ExplainResponse:
    """Explain's answer: the memory, its lineage with scores, sources, edges, decisions."""
    out = pb.ExplainResponse(truncated=ex.truncated)
    rel, val = ex.scores.reliability, ex.scores.value

    def put(rec: MemoryRecord, msg: pb.Memory) -> None:
        memory_to_pb(rec, msg, reliability=rel.get(rec.id), value=val.get(rec.id))

    put(ex.memory, out.memory)
    for rec in ex.ancestors:
        put(rec, out.ancestors.add())
    for rec in ex.descendants:
        put(rec, out.descendants.add())
    for source in sorted(ex.source_stats):
        ok, bad = ex.source_stats[source]
        out.sources.add(
            source=source, credibility=ex.scores.credibility.get(source, 0.0), ok=ok, bad=bad
        )
    for a, b in ex.edges:
        out.edges.add(from_id=a, to_id=b)
    for d in ex.decisions:
        decision_to_pb(d, out.decisions.add())
    for g in ex.grants:
        grant_to_pb(g, ex.at, out.grants.add())
    for rec in ex.versions:
        memory_to_pb(rec, out.versions.add())
    if ex.proposal is not None:
        proposal_to_pb(ex.proposal, ex.objections_left, out.proposal)
        # the objections are the memory's history too (kept with its proposal)
        for o in ex.proposal.objections:
            status = STATUS_TO_PB.get(ex.memory.status, pb.STATUS_UNSPECIFIED)
            entry = out.memory.history.add(
                from_status=status, to_status=status, reason=f"objection by {o.by}: {o.reason}"
            )
            to_ts(o.at, entry.at)
    return out


def policies_to_pb(serving: ServingPolicies) -> pb.ListPoliciesResponse:
    out = pb.ListPoliciesResponse(version=serving.version, strategy=serving.compiled.strategy)
    for p in serving.compiled.policies:
        out.policies.add(
            name=p.name,
            file=p.path,
            line=p.line,
            priority=p.priority,
            effect=EFFECT_TO_PB[p.effect],
            operations=sorted(OP_TO_PB[o] for o in p.ops),
        )
    return out


def sweep_to_pb(report: SweepReport) -> pb.RunSweepResponse:
    out = pb.RunSweepResponse(examined=report.examined, unreadable=report.unreadable)
    for items, target in (
        (report.transitions, out.transitions),
        (report.refused, out.refused),
        (report.proposed, out.proposed),
    ):
        for t in items:
            target.add(
                memory_id=t.memory_id,
                reason=t.reason,
                from_status=STATUS_TO_PB.get(t.from_status, pb.STATUS_UNSPECIFIED),
                to_status=STATUS_TO_PB.get(t.to_status, pb.STATUS_UNSPECIFIED),
            )
    return out


def diagnostics_to_pb(diags: Iterable[Diagnostic], out: Any) -> None:
    """Append `diags` to a repeated Diagnostic field `out`."""
    for d in diags:
        out.add(
            code=d.code,
            severity=str(d.severity),
            message=d.message,
            file=d.file,
            line=d.span.line,
            column=d.span.column,
            end_line=d.span.end_line,
            end_column=d.span.end_column,
            snippet=d.snippet,
            help=d.help or "",
            rendered=f"{d.location}: {d.severity}[{d.code}]: {d.message}",
        )


def shadow_to_pb(status: ShadowStatus, serving_version: str) -> pb.ShadowResponse:
    out = pb.ShadowResponse(
        active=status.active,
        version=status.version,
        compared=status.compared,
        disagreed=status.disagreed,
        serving_version=serving_version,
    )
    for d in status.diffs:
        out.diffs.add(
            policy=d.policy,
            serving=EFFECT_TO_PB[d.serving],
            candidate=EFFECT_TO_PB[d.candidate],
            count=d.count,
            examples=list(d.examples),
            serving_obligations=list(d.serving_obligations),
            candidate_obligations=list(d.candidate_obligations),
        )
    return out
