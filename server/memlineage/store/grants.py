"""The grant API of the store contract: ``GrantsMixin`` checks and assigns, then
hands each call to the backend's ``_put_grant`` / ``_grants`` / ``_use_grants``.

A grant is written once (its id unique in its namespace) and then changes only by
``use_grants``, which spends one use of each named grant in one atomic step: all of
them, or none when one is no longer effective (concurrent acts cannot overspend).

What every backend shares to read a stored grant back strictly: the JSON field
readers (``json_fields`` and the typed ``*_at``, raising ``DecodeProblem``;
``store.proposals`` uses them too) and ``decoded_grant``. The backend turns a
``DecodeProblem`` into ``lineage.errors.StoreCorruptError`` (DATA_LOSS to a caller)
naming where the value is stored.
"""

from __future__ import annotations

import json
import math
import secrets
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memlineage.lineage.errors import TOO_DEEP
from memlineage.lineage.grants import MAX_GRANT_USES, GrantRecord, validated_grant
from memlineage.lineage.validation import check_id, finite_number

__all__ = [
    "MAX_GRANTS_PER_NAMESPACE",
    "DecodeProblem",
    "GrantsMixin",
    "decoded_grant",
    "int_at",
    "json_fields",
    "number_at",
    "text_at",
    "texts_at",
]

MAX_GRANTS_PER_NAMESPACE = 10_000
"""Grants a namespace holds at most (a store's ``max_grants`` by default): a grant put
into a full namespace makes room by dropping the oldest inert ones (not ``effective``),
never a live one; with too few inert it is refused (``GrantLimitError``)."""


class GrantsMixin:
    """``put_grant`` / ``grants`` / ``use_grants`` of ``LineageStore``."""

    if TYPE_CHECKING:

        def _now(self, now: float | None) -> float: ...

        def _ns(self, namespace: str) -> str: ...

    def put_grant(self, grant: GrantRecord, *, now: float | None = None) -> GrantRecord:
        """Store `grant` (checked, `uses` 0 -> 1, no expiry -> one hour, id assigned
        when empty); ``AlreadyExistsError`` for an id its namespace holds. At the cap,
        the namespace's oldest grants inert at `now` are dropped in the same step to
        make room; ``GrantLimitError`` (nothing changed) when too few are inert."""
        at = self._now(now)
        ns = self._ns(grant.namespace)
        gid = grant.id or f"g-{secrets.token_hex(8)}"
        stored = validated_grant(replace(grant, id=gid, namespace=ns), at)
        self._put_grant(stored, at)
        return stored

    def grants(self, namespace: str) -> list[GrantRecord]:
        """Every grant the namespace holds (effective or not), oldest first."""
        return self._grants(self._ns(namespace))

    def use_grants(self, namespace: str, ids: Sequence[str], *, now: float | None = None) -> bool:
        """Spend one use of each grant in `ids` in one atomic step: True when all were
        effective at `now` and are spent, False (nothing spent) otherwise."""
        unique = [check_id(i, "grant") for i in dict.fromkeys(ids)]
        if not unique:
            return True
        return self._use_grants(self._ns(namespace), unique, self._now(now))

    @abstractmethod
    def _put_grant(self, grant: GrantRecord, now: float) -> None: ...

    @abstractmethod
    def _grants(self, namespace: str) -> list[GrantRecord]: ...

    @abstractmethod
    def _use_grants(self, namespace: str, ids: list[str], now: float) -> bool: ...


class DecodeProblem(ValueError):
    """What is wrong with one stored grant or proposal: the backend turns it into
    ``StoreCorruptError`` naming where it is stored (a row, a key and field)."""


def json_fields(data: object, least: int, most: int) -> list[Any]:
    """A stored value: a JSON list of `least` to `most` fields (text, or bytes of its
    UTF-8), or ``DecodeProblem``."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeProblem(f"is not valid JSON (not UTF-8: {exc})") from None
    if not isinstance(data, str):
        raise DecodeProblem(f"is not valid JSON (a stored {type(data).__name__})")
    try:
        v = json.loads(data)
    except ValueError as exc:
        raise DecodeProblem(f"is not valid JSON ({exc})") from None
    except RecursionError:
        raise DecodeProblem(f"is not valid JSON ({TOO_DEEP})") from None
    if not isinstance(v, list):
        raise DecodeProblem(f"is not a list of fields (a JSON {type(v).__name__})")
    if not least <= len(v) <= most:
        span = f"{least}" if least == most else f"{least} to {most}"
        raise DecodeProblem(f"has {len(v)} fields, not {span}")
    return v


def text_at(v: list[Any], i: int, name: str) -> str:
    if not isinstance(v[i], str):
        raise DecodeProblem(f"field {i} ({name}) is not a string: {v[i]!r}")
    return v[i]


def texts_at(v: list[Any], i: int, name: str) -> tuple[str, ...]:
    if not isinstance(v[i], list) or not all(isinstance(x, str) for x in v[i]):
        raise DecodeProblem(f"field {i} ({name}) is not a list of strings: {v[i]!r}")
    return tuple(v[i])


def int_at(v: list[Any], i: int, name: str) -> int:
    if isinstance(v[i], bool) or not isinstance(v[i], int):
        raise DecodeProblem(f"field {i} ({name}) is not an integer: {v[i]!r}")
    return v[i]


def number_at(v: list[Any], i: int, name: str) -> float:
    """A finite number (JSON's NaN and Infinity are not)."""
    x = v[i]
    if not finite_number(x):
        raise DecodeProblem(f"field {i} ({name}) is not a finite number: {x!r}")
    return float(x)


def decoded_grant(data: object, namespace: object, gid: object) -> GrantRecord:
    """A stored grant as `GrantRecord.to_json` wrote it (field by field, of its type),
    stored under its own namespace and id, its uses within its limit; else
    ``DecodeProblem``."""
    v = json_fields(data, 11, 13)
    expires = v[9]
    g = GrantRecord(
        id=text_at(v, 0, "id"),
        namespace=text_at(v, 1, "namespace"),
        issuer=text_at(v, 2, "issuer"),
        actions=texts_at(v, 3, "actions"),
        arguments=texts_at(v, 4, "arguments"),
        source=text_at(v, 5, "source"),
        memory_id=text_at(v, 6, "memory_id"),
        uses=int_at(v, 7, "uses"),
        used=int_at(v, 8, "used"),
        expires_at=math.inf if expires is None else number_at(v, 9, "expires_at"),
        created_at=number_at(v, 10, "created_at"),
        value=text_at(v, 11, "value") if len(v) > 11 else "",
        digest=text_at(v, 12, "digest") if len(v) > 12 else "",
    )
    if g.id != gid or g.namespace != namespace:
        raise DecodeProblem(f"holds the grant id {g.id!r} of namespace {g.namespace!r}")
    if not 1 <= g.uses <= MAX_GRANT_USES:
        raise DecodeProblem(f"field 7 (uses) {g.uses} is not in [1, {MAX_GRANT_USES}]")
    if not 0 <= g.used <= g.uses:
        raise DecodeProblem(f"field 8 (used) {g.used} is not in [0, its uses {g.uses}]")
    return g
