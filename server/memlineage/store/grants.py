"""The grant API of the store contract: ``GrantsMixin`` checks and assigns, then
hands each call to the backend's ``_put_grant`` / ``_grants`` / ``_use_grants``.

A grant is written once (its id unique in its namespace) and then changes only by
``use_grants``, which spends one use of each named grant in one atomic step: all of
them, or none when one is no longer effective (concurrent acts cannot overspend).
"""

from __future__ import annotations

import secrets
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from memlineage.lineage.grants import GrantRecord, validated_grant
from memlineage.lineage.validation import check_id

__all__ = ["MAX_GRANTS_PER_NAMESPACE", "GrantsMixin"]

MAX_GRANTS_PER_NAMESPACE = 10_000
"""Grants a namespace holds at most; spent and expired ones are dropped first."""


class GrantsMixin:
    """``put_grant`` / ``grants`` / ``use_grants`` of ``LineageStore``."""

    if TYPE_CHECKING:

        def _now(self, now: float | None) -> float: ...

        def _ns(self, namespace: str) -> str: ...

    def put_grant(self, grant: GrantRecord, *, now: float | None = None) -> GrantRecord:
        """Store `grant` (checked, `uses` 0 -> 1, no expiry -> one hour, id assigned
        when empty); ``AlreadyExistsError`` for an id its namespace holds."""
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
