"""proto <-> domain conversion, in one place (Flower's `serde`)."""

from __future__ import annotations

import math
import re
import struct
from typing import Any

from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp
from memlineage_dsl.decision import Decision
from memlineage_dsl.facts import Creator

from memlineage.engine.records import DecisionContext, DecisionRecord
from memlineage.lineage.errors import ValidationError
from memlineage.lineage.model import MemoryRecord
from memlineage.lineage.validation import check_id
from memlineage.v1 import memlineage_pb2 as pb

EFFECT_TO_PB = {"allow": pb.EFFECT_ALLOW, "deny": pb.EFFECT_DENY, "degrade": pb.EFFECT_DEGRADE}
OP_FROM_PB = {
    pb.OPERATION_READ: "read",
    pb.OPERATION_WRITE: "write",
    pb.OPERATION_UPDATE: "update",
    pb.OPERATION_DELETE: "delete",
    pb.OPERATION_DERIVE: "derive",
    pb.OPERATION_ACT: "act",
}
OP_TO_PB = {v: k for k, v in OP_FROM_PB.items()}
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


# Record fields the store validates (its error `field`s), as named inside `memory`.
RECORD_FIELDS = frozenset({
    "id", "type", "tags", "subject", "attribute", "value", "volatility", "creator_kind",
    "creator_id", "creator_confidence", "created_at", "context_id", "dependencies", "status",
})


# ------------------------------------------------------------------ time
def to_ts(seconds: float, ts: Timestamp) -> None:
    whole = math.floor(seconds)
    nanos = round((seconds - whole) * 1e9)
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    ts.seconds = whole
    ts.nanos = nanos


def from_ts(msg, name: str) -> float | None:
    """The float epoch seconds of an optional Timestamp field, None when unset."""
    if not msg.HasField(name):
        return None
    ts = getattr(msg, name)
    if ts.nanos < 0 or ts.nanos > 999_999_999:
        raise ValidationError("nanos out of range", field=name)
    return ts.seconds + ts.nanos / 1e9


# ------------------------------------------------------------------ inputs
def ids(values, field: str, *, indexed: bool = True) -> list[str]:
    """Validate request ids under the request's own field names (`memory_ids[2]`),
    before the store would name them after its parameters."""
    out = list(values)
    for i, value in enumerate(out):
        check_id(value, f"{field}[{i}]" if indexed else field)
    return out


# Many ids in one pass: each one 1..128 allowed characters, "\n"-terminated.
_IDS_RE = re.compile(r"(?:[A-Za-z0-9._:/-]{1,128}\n)*")


def candidate_ids(values: list[str], field: str) -> list[str]:
    """`ids(..., indexed=False)` of every `values[i]` under `{field}[i]...`-style names,
    checked in one regex pass; the per-id check names the first bad one."""
    text = "\n".join(values)
    if values and (text.count("\n") != len(values) - 1
                   or not _IDS_RE.fullmatch(text + "\n")):
        for i, value in enumerate(values):
            check_id(value, field.format(i))
    return values


def parse(message_class: Any, data: bytes) -> Any:
    """A request the servicer receives as bytes, parsed; bytes that are not such a
    message are the caller's error (INVALID_ARGUMENT), not the server's."""
    try:
        return message_class.FromString(data)
    except DecodeError as exc:
        raise ValidationError(f"is not a valid {message_class.DESCRIPTOR.full_name} "
                              f"message ({exc})", field="request") from exc


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
        raise ValidationError("kind must be user, tool, reasoning, agent or system",
                              field=f"{field}.kind")
    if not msg.id:
        raise ValidationError("must not be empty", field=f"{field}.id")
    return Creator(kind, msg.id)


def budget(msg) -> float | None:
    return msg.budget if msg.HasField("budget") else None


def record_from_pb(namespace: str, m: pb.Memory) -> MemoryRecord:
    """A proposed record; the store validates ids, limits, confidence and time."""
    kind = KIND_FROM_PB.get(m.creator.kind)
    if kind is None:
        raise ValidationError("kind must be user, tool, reasoning, agent or system",
                              field="memory.creator.kind")
    if not m.creator.id:
        raise ValidationError("must not be empty", field="memory.creator.id")
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
        created_at=from_ts(m, "created_at"),
        context_id=m.context_id or None,
        dependencies=tuple(m.dependencies),
    )


# ------------------------------------------------------------------ outputs
def memory_to_pb(rec: MemoryRecord, out: pb.Memory | None = None, *,
                 reliability: float | None = None, value: float | None = None) -> pb.Memory:
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


_TEMPLATES: dict[int, tuple[Decision, bytes]] = {}


def _template(d: Decision) -> bytes:
    """The serialized part of a pb.Decision that depends only on the (frozen, shared)
    Decision: built once, then merged into each response."""
    hit = _TEMPLATES.get(id(d))
    if hit is not None and hit[0] is d:
        return hit[1]
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
            ob.factor = float(arg)  # type: ignore[arg-type]
        elif arg is not None:
            ob.text = str(arg)
    for r in d.reasons:
        msg.reasons.add(policy=r.policy, effect=EFFECT_TO_PB[r.effect], message=r.message,
                        priority=r.priority, status=r.status)
    data = msg.SerializeToString()
    if len(_TEMPLATES) > 4096:
        _TEMPLATES.clear()
    _TEMPLATES[id(d)] = (d, data)
    return data


# ------------------------------------------------------------------ wire encoding
# The per-decision fields (id, memories, time, version) and the FilterRank items
# are written straight in protobuf wire format and parsed once per response in C:
# cheaper than a Python call per field. The result is the same message.
def _varint_slow(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF  # negative int64: ten bytes, two's complement
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_VARINTS = tuple(_varint_slow(n) for n in range(1 << 14))
# 14 low bits as two 7-bit groups, both with the continuation bit: the head of any
# larger varint, so timestamps (seconds ~2**31, nanos ~2**30) take 2-3 lookups.
_CONTINUED = tuple(bytes(((n & 0x7F) | 0x80, (n >> 7) | 0x80)) for n in range(1 << 14))


def _varint(n: int) -> bytes:
    if 0 <= n < 16384:
        return _VARINTS[n]
    if n < 0:
        return _varint_slow(n)
    out = _CONTINUED[n & 0x3FFF]
    n >>= 14
    while n >= 16384:
        out += _CONTINUED[n & 0x3FFF]
        n >>= 14
    return out + _VARINTS[n]


def _string(tag: bytes, value: str) -> bytes:
    data = value.encode()
    return tag + _varint(len(data)) + data if data else b""


def _timestamp(seconds: float) -> bytes:
    """The encoded Timestamp `to_ts` would set (zero fields omitted)."""
    whole = math.floor(seconds)
    nanos = round((seconds - whole) * 1e9)
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    return (b"\x08" + _varint(whole) if whole else b"") + (
        b"\x10" + _varint(nanos) if nanos else b"")


_OP_VERSION: dict[tuple[str, str], tuple[bytes, bytes]] = {}


def _op_version(operation: str, policy_version: str) -> tuple[bytes, bytes]:
    """Decision fields 8 (operation) and 11 (policy version), encoded once."""
    fixed = _OP_VERSION.get((operation, policy_version))
    if fixed is None:
        if len(_OP_VERSION) > 64:  # policy versions come and go with reloads
            _OP_VERSION.clear()
        op = OP_TO_PB[operation]
        fixed = _OP_VERSION[(operation, policy_version)] = (
            b"\x40" + _varint(op) if op else b"", _string(b"\x5a", policy_version))
    return fixed


def _decision_tail(operation: str, decided_at: float, policy_version: str) -> bytes:
    """Decision fields 8, 10 and 11."""
    fixed = _op_version(operation, policy_version)
    ts = _timestamp(decided_at)
    return b"".join((fixed[0], b"\x52", _VARINTS[len(ts)], ts, fixed[1]))


def decision_to_pb(rec: DecisionRecord, out: pb.Decision | None = None) -> pb.Decision:
    msg = out if out is not None else pb.Decision()
    msg.MergeFromString(_template(rec.decision))
    msg.decision_id = rec.decision_id
    msg.operation = OP_TO_PB[rec.operation]
    msg.memory_ids.extend(rec.memory_ids)
    to_ts(rec.decided_at, msg.decided_at)
    msg.policy_version = rec.policy_version
    return msg


def _ids_field(memory_ids: tuple[str, ...]) -> bytes:
    """Decision field 9 (repeated memory_ids), an empty id included."""
    return b"".join(_string(b"\x4a", m) or b"\x4a\x00" for m in memory_ids)


def check_response_bytes(rec: DecisionRecord) -> bytes:
    """The encoded CheckResponse of `rec`: what ``CheckResponse(decision=decision_to_pb(
    rec))`` serializes to, written directly (the servicer sends these bytes as they are)."""
    return CheckAnswer(rec).encode(rec.decision_id, rec.decided_at)


class CheckAnswer:
    """The encoded CheckResponse of a decision issued again and again (decision reuse):
    everything but its id and time encoded once; `encode` adds those two."""

    __slots__ = ("head", "middle", "tail")

    def __init__(self, rec: DecisionRecord | DecisionContext) -> None:
        ids = rec.memory_ids
        fixed = _op_version(rec.operation, rec.policy_version)
        self.head = _template(rec.decision)
        self.middle = (_string(b"\x4a", ids[0]) if len(ids) == 1 and ids[0]
                       else _ids_field(ids)) + fixed[0] + b"\x52"
        self.tail = fixed[1]

    def encode(self, decision_id: str, decided_at: float) -> bytes:
        ts = _timestamp(decided_at)
        body = b"".join((self.head, _string(b"\x0a", decision_id), self.middle,
                         _VARINTS[len(ts)], ts, self.tail))
        return b"\x0a" + _varint(len(body)) + body


_SCORES = struct.Struct("<BdBdB?").pack  # similarity (2), rank_score (3), kept (4)
_QUALITY = struct.Struct("<BdBd").pack  # reliability (6), value_score (7)


def filter_rank_response(ranked) -> pb.FilterRankResponse:
    """`ranked` (engine RankedCandidates, request order) as a FilterRankResponse:
    every candidate, then the kept ids best first (stable)."""
    return pb.FilterRankResponse.FromString(filter_rank_bytes(ranked))


def filter_rank_bytes(ranked) -> bytes:
    """The encoded FilterRankResponse (see `filter_rank_response`), sent as is."""
    parts: list[bytes] = []
    tails: dict[tuple[str, float, str], bytes] = {}
    templates: dict[int, bytes] = {}
    varint = _varint
    for c in ranked:
        rec = c.decision
        key = (rec.operation, rec.decided_at, rec.policy_version)
        tail = tails.get(key)
        if tail is None:
            tail = tails[key] = _decision_tail(*key)
        d = rec.decision
        template = templates.get(id(d))
        if template is None:
            template = templates[id(d)] = _template(d)
        mid = c.memory_id.encode()
        if rec.memory_ids == (c.memory_id,):
            ids = b"\x4a" + varint(len(mid)) + mid
        else:
            ids = _ids_field(rec.memory_ids)
        body = b"".join((template, _string(b"\x0a", rec.decision_id), ids, tail))
        item = b"".join((
            b"\x0a", varint(len(mid)), mid,
            _SCORES(0x11, c.similarity, 0x19, c.rank_score, 0x20, c.kept),
            b"\x2a", varint(len(body)), body,
            _QUALITY(0x31, c.reliability, 0x39, c.value_score),
        ))
        parts.append(b"\x0a" + varint(len(item)) + item)
    best = sorted((c for c in ranked if c.kept), key=lambda c: -c.rank_score)
    for c in best:
        data = c.memory_id.encode()
        parts.append(b"\x12" + varint(len(data)) + data)
    return b"".join(parts)


def event_to_pb(e) -> pb.LineageEvent:  # e: memlineage.lineage.model.LineageEvent
    msg = pb.LineageEvent(
        cursor=e.cursor, type=e.type, memory_id=e.memory_id, root_id=e.root_id or "",
        status=STATUS_TO_PB.get(e.status or "", pb.STATUS_UNSPECIFIED),
        previous_status=STATUS_TO_PB.get(e.previous_status or "", pb.STATUS_UNSPECIFIED),
        reason=e.reason or "", successor=e.successor or "", affected_ids=list(e.affected),
        version=e.version or 0,
    )
    to_ts(e.at, msg.at)
    return msg
