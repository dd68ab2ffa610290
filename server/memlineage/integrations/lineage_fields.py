"""The lineage fields an adapter takes from a value, its metadata, a hook or its
defaults, checked by name and by type before anything is written: a string of
dependencies was split into one dependency per character, a mapping was taken as a
list, a confidence of "high" or NaN was sent on, and in Mem0 the add ran before the
error (an outside audit)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from memlineage.client.convert import parse_creator
from memlineage.client.guarded import RECORD_FIELDS

LINEAGE_FIELDS = RECORD_FIELDS
"""What a lineage mapping may hold: what a Record takes."""

_TEXTS = ("creator", "type", "volatility", "context_id")


def checked_lineage(fields: Any, where: str) -> dict[str, Any]:
    """`fields` as a dict when each is one the sidecar takes and of its type (None:
    unset), else ValueError naming `where` and the field. A dependency is a string
    or, for the LangGraph store, a ``[namespace, key]`` pair (its adapter reads it)."""
    if not isinstance(fields, Mapping):
        raise ValueError(f"{where}: lineage must be a mapping, got {type(fields).__name__}")
    unknown = sorted(map(repr, set(fields) - set(LINEAGE_FIELDS)))  # keys of any type
    if unknown:
        raise ValueError(
            f"{where}: unknown lineage field(s) {', '.join(unknown)}; "
            f"expected some of {', '.join(LINEAGE_FIELDS)}"
        )
    for name, value in fields.items():
        if value is None:
            continue
        bad = _problem(name, value)
        if bad:
            raise ValueError(f"{where}: {name}: {value!r} {bad}")
        if name == "creator":
            _kind_named(value, where)
    return dict(fields)


def _kind_named(creator: str, where: str) -> None:
    """A creator with no ``kind:`` prefix refused here, naming the field the caller
    wrote: Mem0's add asks its provisional check *as* the creator, so the client's
    own refusal named ``actor`` (a field the caller never wrote)."""
    try:
        parse_creator(creator)
    except ValueError as exc:  # "creator: 'alice' is not "kind:id" with kind one of ..."
        raise ValueError(f"{where}: {exc}") from None


def _finite(value: float) -> bool:
    """A finite number a float holds (an int past float's range is not one: isfinite
    of it raises OverflowError)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _problem(name: str, value: Any) -> str:
    if name in _TEXTS:
        return "" if isinstance(value, str) and value else "is not a non-empty string"
    if name == "confidence":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "is not a number"
        return "" if _finite(value) and 0.0 <= value <= 1.0 else "is not in [0, 1]"
    if name == "created_at":
        ok = not isinstance(value, bool) and isinstance(value, int | float)
        return "" if ok and _finite(value) else "is not a time (seconds since the epoch)"
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, list | tuple):
        return "is not a list"
    if name == "tags":
        return "" if all(isinstance(t, str) for t in value) else "is not a list of strings"
    if name == "claim":
        ok = len(value) == 3 and all(isinstance(p, str) for p in value)
        return "" if ok else "is not [subject, attribute, value]"
    return ""  # dependencies: each is read by the adapter
