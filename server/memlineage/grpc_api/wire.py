"""Check and FilterRank answers written straight in protobuf wire format.

The request path's encoder: the parts of an answer that depend only on a
(frozen, shared) Decision are serialized once and cached; the per-decision
fields (id, memories, time, policy version) and the FilterRank items are
written as bytes and sent as they are (the servicer registers a pass-through
serializer), cheaper than a Python call per field. `serde` is the reference:
tests pin every encoding here to the message `serde` builds field by field.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable

from memlineage_dsl.decision import Decision

from memlineage.engine.outcomes import RankedCandidate
from memlineage.engine.records import DecisionContext, DecisionRecord
from memlineage.grpc_api import serde
from memlineage.v1 import memlineage_pb2 as pb

OP_TO_PB = serde.OP_TO_PB

_TEMPLATES: dict[int, tuple[Decision, bytes]] = {}


def _template(d: Decision) -> bytes:
    """The serialized part of a pb.Decision that depends only on the (frozen, shared)
    Decision: built once, then merged into each response."""
    hit = _TEMPLATES.get(id(d))
    if hit is not None and hit[0] is d:
        return hit[1]
    data = serde.verdict_to_pb(d).SerializeToString()
    if len(_TEMPLATES) > 4096:
        _TEMPLATES.clear()
    _TEMPLATES[id(d)] = (d, data)
    return data


# ------------------------------------------------------------------ wire encoding
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


def varint(n: int) -> bytes:
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
    return tag + varint(len(data)) + data if data else b""


def _timestamp(seconds: float) -> bytes:
    """The encoded Timestamp `to_ts` would set (zero fields omitted)."""
    whole = math.floor(seconds)
    nanos = round((seconds - whole) * 1e9)
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    return (b"\x08" + varint(whole) if whole else b"") + (b"\x10" + varint(nanos) if nanos else b"")


_OP_VERSION: dict[tuple[str, str], tuple[bytes, bytes]] = {}


def _op_version(operation: str, policy_version: str) -> tuple[bytes, bytes]:
    """Decision fields 8 (operation) and 11 (policy version), encoded once."""
    fixed = _OP_VERSION.get((operation, policy_version))
    if fixed is None:
        if len(_OP_VERSION) > 64:  # policy versions come and go with reloads
            _OP_VERSION.clear()
        op = OP_TO_PB[operation]
        fixed = _OP_VERSION[(operation, policy_version)] = (
            b"\x40" + varint(op) if op else b"",
            _string(b"\x5a", policy_version),
        )
    return fixed


def _decision_tail(operation: str, decided_at: float, policy_version: str) -> bytes:
    """Decision fields 8, 10 and 11."""
    fixed = _op_version(operation, policy_version)
    ts = _timestamp(decided_at)
    return b"".join((fixed[0], b"\x52", _VARINTS[len(ts)], ts, fixed[1]))


def _ids_field(memory_ids: tuple[str, ...]) -> bytes:
    """Decision field 9 (repeated memory_ids), an empty id included."""
    return b"".join(_string(b"\x4a", m) or b"\x4a\x00" for m in memory_ids)


def check_response_bytes(rec: DecisionRecord) -> bytes:
    """The encoded CheckResponse of `rec`: what ``CheckResponse(decision=decision_to_pb(
    rec))`` serializes to, written directly (the servicer sends these bytes as they are)."""
    ids = rec.memory_ids
    fixed = _op_version(rec.operation, rec.policy_version)
    ts = _timestamp(rec.decided_at)
    body = b"".join(
        (
            _template(rec.decision),
            _string(b"\x0a", rec.decision_id),
            _string(b"\x4a", ids[0]) if len(ids) == 1 and ids[0] else _ids_field(ids),
            fixed[0],
            b"\x52",
            _VARINTS[len(ts)],
            ts,
            fixed[1],
            *(_string(b"\x62", g) for g in rec.grants_used),  # field 12, grants_used
        )
    )
    return b"\x0a" + varint(len(body)) + body


class CheckAnswer:
    """The encoded CheckResponse of a decision issued again and again (decision reuse):
    everything but its id and time encoded once; `encode` adds those two."""

    __slots__ = ("head", "middle", "tail")

    def __init__(self, rec: DecisionRecord | DecisionContext) -> None:
        ids = rec.memory_ids
        fixed = _op_version(rec.operation, rec.policy_version)
        self.head = _template(rec.decision)
        self.middle = (
            (_string(b"\x4a", ids[0]) if len(ids) == 1 and ids[0] else _ids_field(ids))
            + fixed[0]
            + b"\x52"
        )
        self.tail = fixed[1]

    def encode(self, decision_id: str, decided_at: float) -> bytes:
        ts = _timestamp(decided_at)
        body = b"".join(
            (
                self.head,
                _string(b"\x0a", decision_id),
                self.middle,
                _VARINTS[len(ts)],
                ts,
                self.tail,
            )
        )
        return b"\x0a" + varint(len(body)) + body


_SCORES = struct.Struct("<BdBdB?").pack  # similarity (2), rank_score (3), kept (4)
_QUALITY = struct.Struct("<BdBd").pack  # reliability (6), value_score (7)


def filter_rank_response(ranked: Iterable[RankedCandidate]) -> pb.FilterRankResponse:
    """`ranked` (engine RankedCandidates, request order) as a FilterRankResponse:
    every candidate, then the kept ids best first (stable)."""
    return pb.FilterRankResponse.FromString(filter_rank_bytes(ranked))


def filter_rank_bytes(ranked: Iterable[RankedCandidate]) -> bytes:
    """The encoded FilterRankResponse (see `filter_rank_response`), sent as is."""
    # Every piece goes into one list joined once: the lengths of a candidate's nested
    # messages are summed from its pieces, no bytes object is built per level. Per
    # candidate, no call the loop can do itself: a varint under 2**14 (any id, any
    # candidate's size) is an index into `_VARINTS`.
    parts: list[bytes] = []
    add = parts.extend
    # per (decision, operation, time, policy version): its template, the tail, and
    # the length of both with the two one-byte tags of the id fields
    fixed: dict[tuple[int, str, float, str], tuple[bytes, bytes, int]] = {}
    tails: dict[tuple[str, float, str], bytes] = {}
    scores, quality, small = _SCORES, _QUALITY, _VARINTS
    for c in ranked:
        rec = c.decision
        d = rec.decision
        key = (id(d), rec.operation, rec.decided_at, rec.policy_version)
        known = fixed.get(key)
        if known is None:
            tail_key = key[1:]
            tail = tails.get(tail_key)
            if tail is None:
                tail = tails[tail_key] = _decision_tail(*tail_key)
            template = _template(d)
            known = fixed[key] = (template, tail, len(template) + len(tail) + 2)
        template, tail, fixed_len = known
        mid = c.memory_id.encode()
        n = len(mid)
        sized = (small[n] if n < 16384 else varint(n)) + mid  # the id, length-delimited
        body: tuple[bytes, ...]
        if rec.memory_ids == (c.memory_id,):
            did = rec.decision_id.encode()
            n = len(did)
            size = small[n] if n < 16384 else varint(n)
            body = (template, b"\x0a", size, did, b"\x4a", sized, tail)
            body_len = fixed_len + len(size) + n + len(sized)
        else:
            whole = b"".join(
                (template, _string(b"\x0a", rec.decision_id), _ids_field(rec.memory_ids), tail)
            )
            body, body_len = (whole,), len(whole)
        body_size = small[body_len] if body_len < 16384 else varint(body_len)
        # field 1 tag + id, 20 bytes of scores, field 5 tag + size + body, 18 of quality
        n = len(sized) + len(body_size) + body_len + 40
        add((b"\x0a", small[n] if n < 16384 else varint(n), b"\x0a", sized))
        add((scores(0x11, c.similarity, 0x19, c.rank_score, 0x20, c.kept), b"\x2a", body_size))
        add(body)
        parts.append(quality(0x31, c.reliability, 0x39, c.value_score))
    best = sorted((c for c in ranked if c.kept), key=lambda c: -c.rank_score)
    for c in best:
        data = c.memory_id.encode()
        parts.append(b"\x12" + varint(len(data)) + data)
    return b"".join(parts)
