"""How the Redis backend lays a memory out: the record hash's short field names and
the encoding of values into it, and the decoding of script replies (record hashes,
status history entries, stream entries) back into MemoryRecords and LineageEvents.

The Lua scripts (``redis_scripts``) read and write the same layout.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from memlineage.lineage.errors import StoreCorruptError
from memlineage.lineage.model import CreatorKind, LineageEvent, MemoryRecord, Status, StatusChange

# Record hash field names: short, because they are stored once per record.
FIELDS = {
    "type": "t",
    "tags": "g",
    "subject": "s",
    "attribute": "a",
    "value": "v",
    "volatility": "o",
    "creator_kind": "k",
    "creator_id": "c",
    "creator_confidence": "f",
    "created_at": "w",
    "context_id": "x",
    "dependencies": "d",
    "status": "S",
    "successor": "u",
    "version": "V",
    "last_access": "l",
    "access_count": "n",
    "confirmed_by": "y",
    "contradicted_by": "z",
    "uses_ok": "j",
    "uses_failed": "q",
    "reviewed_at": "r",
}
FLOATS = frozenset({"creator_confidence", "created_at", "last_access", "reviewed_at"})
STORE_KEPT = frozenset(
    {"last_access", "access_count", "successor", "uses_ok", "uses_failed", "reviewed_at"}
)
"""Fields the store maintains after record time (never written by ``record``)."""
JOINED = frozenset({"tags", "dependencies", "confirmed_by", "contradicted_by"})


def spaced(statuses: frozenset[Status]) -> str:
    """Statuses as ' a b c ' so Lua can test membership with a plain find."""
    return " " + " ".join(sorted(s.value for s in statuses)) + " "


def encode_field(name: str, value: Any) -> str:
    if name in JOINED:
        return " ".join(value)
    if name in FLOATS:
        return repr(float(value))
    return str(value)


def decode(
    namespace: str,
    memory_id: str,
    h: dict[str, str],
    history: list[str],
    derivations: list[str],
    base: str | None = None,
) -> MemoryRecord:
    """`decode_flat` of a hash already paired into a dict (a script's reply)."""
    flat = [x for item in h.items() for x in item]
    return decode_flat(namespace, memory_id, flat, history, derivations, base)


def split(joined: str) -> tuple[str, ...]:
    """A space-joined list of ids or tags (never an empty one: an empty list is no
    field at all)."""
    out = tuple(joined.split(" "))
    if "" in out:
        raise ValueError(f"an empty name in {joined[:80]!r}")
    return out


NAMES = {short: name for name, short in FIELDS.items()}
CONVERT: dict[str, Any] = {FIELDS[f]: split for f in JOINED}
CONVERT.update({FIELDS[f]: float for f in FLOATS})
_REDIS_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")


def redis_int(value: str) -> int:
    """An integer as Redis writes it (and HINCRBY takes): no sign `+`, leading zero,
    space or `_` that Python's int() would also accept."""
    if _REDIS_INT.fullmatch(value) is None:
        raise ValueError(f"{value[:40]!r} is not an integer as the store writes it")
    return int(value)


CONVERT.update(
    {FIELDS[f]: redis_int for f in ("version", "access_count", "uses_ok", "uses_failed")}
)
REQUIRED = frozenset(
    ("type", "creator_kind", "creator_id", "creator_confidence", "created_at", "status", "version")
)
"""Fields every record hash holds (``record`` writes them all, nothing deletes them)."""
STATUSES = frozenset(s.value for s in Status)
CREATOR_KINDS = frozenset(k.value for k in CreatorKind)
RECORD_REMEDY = (
    "nothing was changed (write the field again as the store wrote it, or restore the "
    "memory from a backup)"
)
"""The end of a ``StoreCorruptError`` for a record the Redis store cannot read."""
_INF = math.inf


def decode_flat(
    namespace: str,
    memory_id: str,
    flat: list[str],
    history: Any,
    derivations: list[str],
    base: str | None = None,
) -> MemoryRecord:
    """decode straight from an HGETALL reply (field, value, ...): absent fields take
    the record's defaults (empty / zero / None, as the hash layout says), except the
    ones every record holds (``REQUIRED``).

    Strict: a value that does not convert, a missing required field, a status,
    creator kind, confidence or time no record can have, or a damaged status history
    entry is ``StoreCorruptError`` naming the key (under `base`, the namespace's key
    tag; without it, the memory) and the field. The conversions are the plain ones,
    their failures caught; the checks after them are one comparison each."""
    names, convert = NAMES, CONVERT
    kw: dict[str, Any] = {
        "id": memory_id,
        "namespace": namespace,
        "derivations": tuple(sorted(derivations)),
    }
    short = ""
    try:
        it = iter(flat)
        for short, value in zip(it, it, strict=True):
            name = names.get(short)
            if name is not None:
                conv = convert.get(short)
                kw[name] = conv(value) if conv is not None else value
    except (ValueError, TypeError) as exc:
        raise _corrupt_record(namespace, memory_id, base, short, flat, exc) from None
    try:  # what converted but no record holds (NaN fails every comparison)
        sound = (
            0.0 <= kw["creator_confidence"] <= 1.0
            and 0.0 <= kw["created_at"] < _INF
            and kw["version"] >= 1
            and kw["status"] in STATUSES
            and kw["creator_kind"] in CREATOR_KINDS
            and 0.0 <= kw.get("last_access", 0.0) < _INF
            and 0.0 <= kw.get("reviewed_at", 0.0) < _INF
            and "type" in kw
            and "creator_id" in kw
        )
    except KeyError:  # a required field is missing
        sound = False
    if not sound:
        raise _impossible_record(namespace, memory_id, base, kw)
    if history:
        try:
            kw["status_history"] = tuple(decode_history(e) for e in history)
        except (ValueError, TypeError):
            raise _corrupt_history(namespace, memory_id, base, history) from None
    return MemoryRecord(**kw)


def decode_history(entry: str) -> StatusChange:
    at, frm, to, reason, root = entry.split("\x1f")
    return StatusChange(float(at), frm, to, reason, root)


def _key(namespace: str, memory_id: str, base: str | None, kind: str) -> str:
    """The key of the memory's record hash (`kind` m) or status history (h); without
    the namespace's key tag (a caller that did not pass it), the memory."""
    if base is None:
        what = "record" if kind == "m" else "status history"
        return f"{what} of memory {memory_id!r} in namespace {namespace!r}"
    return f"{base}:{kind}:{memory_id}"


def _corrupt(where: str, problem: str) -> StoreCorruptError:
    return StoreCorruptError(where, problem, store="redis", remedy=RECORD_REMEDY)


def _corrupt_history(
    namespace: str, memory_id: str, base: str | None, history: Any
) -> StoreCorruptError:
    where = _key(namespace, memory_id, base, "h")
    for i, e in enumerate(history):
        try:
            decode_history(e)
        except (ValueError, TypeError) as exc:
            return _corrupt(where, f"entry {i} is not at|from|to|reason|root ({exc})")
    return _corrupt(where, "it is not a status history as the store writes it")


def _field(short: str) -> str:
    name = NAMES.get(short)
    return f"field {short!r}" + (f" ({name})" if name else "")


def _corrupt_record(
    namespace: str, memory_id: str, base: str | None, short: str, flat: list[str], exc: Exception
) -> StoreCorruptError:
    where = _key(namespace, memory_id, base, "m")
    if len(flat) % 2:
        return _corrupt(where, f"the reply has {len(flat)} items, not field-value pairs")
    conv = CONVERT.get(short)
    kind = (
        "a number"
        if conv is float
        else "an integer"
        if conv is redis_int  # (before: `int`, so an integer field was "a list of names")
        else "a list of names joined by spaces"
    )
    return _corrupt(where, f"the value of {_field(short)} is not {kind} ({exc})")


def _impossible_record(
    namespace: str, memory_id: str, base: str | None, kw: dict[str, Any]
) -> StoreCorruptError:
    """Which check of `decode_flat` failed (the slow path: only for a damaged record)."""
    where = _key(namespace, memory_id, base, "m")
    for name in sorted(REQUIRED, key=list(FIELDS).index):
        if name not in kw:
            return _corrupt(where, f"{_field(FIELDS[name])} is missing")
    checks: list[tuple[str, Callable[[Any], bool], str]] = [
        ("creator_confidence", lambda x: 0.0 <= x <= 1.0, "a confidence in [0, 1]"),
        ("created_at", lambda x: 0.0 <= x < _INF, "a finite time, not negative"),
        ("last_access", lambda x: 0.0 <= x < _INF, "a finite time, not negative"),
        ("reviewed_at", lambda x: 0.0 <= x < _INF, "a finite time, not negative"),
        ("version", lambda x: x >= 1, "a version (1 or more)"),
        ("status", lambda x: x in STATUSES, "a status"),
        ("creator_kind", lambda x: x in CREATOR_KINDS, "a creator kind"),
    ]
    for name, ok, what in checks:
        if name in kw and not ok(kw[name]):
            return _corrupt(
                where, f"the value of {_field(FIELDS[name])} is not {what}: {kw[name]!r}"
            )
    return _corrupt(where, "it is not a record as the store writes it")


def not_utf8(key: str, reply: dict[bytes, bytes] | list[bytes]) -> StoreCorruptError | None:
    """What of a record's key, read as bytes (a hash's HGETALL, a list's LRANGE), is
    not UTF-8 (the client decodes every reply: such a reply fails as a whole)."""
    items = reply.items() if isinstance(reply, dict) else enumerate(reply)
    for name, value in items:
        if isinstance(name, bytes):
            try:
                short = name.decode("utf-8")
            except UnicodeDecodeError as exc:
                return _corrupt(key, f"the field name {name!r} is not UTF-8 ({exc})")
            what = f"the value of {_field(short)}"
        else:
            what = f"entry {name}"
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as exc:
            return _corrupt(key, f"{what} is not UTF-8 ({exc})")
    return None


def pairs(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def decode_event(namespace: str, entry_id: str, flat: list[str]) -> LineageEvent:
    f = pairs(flat)
    g = f.get
    version = g("v")
    return LineageEvent(
        cursor=entry_id,
        type=f["t"],
        namespace=namespace,
        memory_id=f["m"],
        at=float(f["a"]),
        root_id=g("r") or None,
        status=g("s") or None,
        previous_status=g("f") or None,
        reason=g("w", ""),
        successor=g("u") or None,
        affected=tuple(f["x"].split(" ")) if g("x") else (),
        version=int(version) if version else None,
        deadline=float(g("d") or 0) or None,
    )
