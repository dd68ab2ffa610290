"""How the Redis backend lays a memory out: the record hash's short field names and
the encoding of values into it, and the decoding of script replies (record hashes,
status history entries, stream entries) back into MemoryRecords and LineageEvents.

The Lua scripts (``redis_scripts``) read and write the same layout.
"""

from __future__ import annotations

from typing import Any

from memlineage.lineage.model import LineageEvent, MemoryRecord, Status, StatusChange

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
    namespace: str, memory_id: str, h: dict[str, str], history: list[str], derivations: list[str]
) -> MemoryRecord:
    g = h.get
    return MemoryRecord(
        id=memory_id,
        namespace=namespace,
        type=h["t"],
        tags=tuple(h["g"].split(" ")) if "g" in h else (),
        subject=g("s"),
        attribute=g("a"),
        value=g("v"),
        volatility=g("o"),
        creator_kind=h["k"],
        creator_id=h["c"],
        creator_confidence=float(h["f"]),
        created_at=float(h["w"]),
        context_id=g("x"),
        dependencies=tuple(h["d"].split(" ")) if "d" in h else (),
        derivations=tuple(sorted(derivations)),
        status=h["S"],
        successor=g("u"),
        version=int(h["V"]),
        last_access=float(h["l"]) if "l" in h else None,
        access_count=int(h.get("n", 0)),
        status_history=tuple(decode_history(e) for e in history),
        confirmed_by=tuple(h["y"].split(" ")) if "y" in h else (),
        contradicted_by=tuple(h["z"].split(" ")) if "z" in h else (),
        uses_ok=int(h.get("j", 0)),
        uses_failed=int(h.get("q", 0)),
        reviewed_at=float(h["r"]) if "r" in h else None,
    )


def split(joined: str) -> tuple[str, ...]:
    return tuple(joined.split(" "))


NAMES = {short: name for name, short in FIELDS.items()}
CONVERT: dict[str, Any] = {FIELDS[f]: split for f in JOINED}
CONVERT.update({FIELDS[f]: float for f in FLOATS})
CONVERT.update({FIELDS[f]: int for f in ("version", "access_count", "uses_ok", "uses_failed")})


def decode_flat(
    namespace: str, memory_id: str, flat: list[str], history: Any, derivations: list[str]
) -> MemoryRecord:
    """decode straight from an HGETALL reply (field, value, ...): absent fields take
    the record's defaults (empty / zero / None, as the hash layout says)."""
    names, convert = NAMES, CONVERT
    kw: dict[str, Any] = {
        "id": memory_id,
        "namespace": namespace,
        "derivations": tuple(sorted(derivations)),
    }
    it = iter(flat)
    for short, value in zip(it, it, strict=True):
        name = names.get(short)
        if name is not None:
            conv = convert.get(short)
            kw[name] = conv(value) if conv is not None else value
    if history:
        kw["status_history"] = tuple(decode_history(e) for e in history)
    return MemoryRecord(**kw)


def decode_history(entry: str) -> StatusChange:
    at, frm, to, reason, root = entry.split("\x1f")
    return StatusChange(float(at), frm, to, reason, root)


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
