"""Bounded caches shared by tenants, where a tenant filling it evicts its own entries.

A process-wide cache cleared whole when full lets one tenant (a namespace, a caller
scope) empty every other tenant's entries by sending many distinct requests: the
others lose speed, and whether one's own entries survive tells it about the others'
traffic (an outside audit). `Shares` keeps one table per tenant, `total` entries in
all: a put that finds the whole full drops the tenant holding the most (the one
filling it, ties going to the putter), so a tenant loses entries to another only
while it holds more than that one. At most `tenants` tenants are tracked: one more
drops the tenant whose last put is the oldest, with its entries.

Reads take no lock (`tables.get(tenant)`, then the table's own `get`: one dict lookup
more than a flat table); every change is made here under the lock, so the count is
exact. A table dropped while a reader holds it only stops being found afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Shares(Generic[K, V]):
    """Tables per tenant: `total` entries in all, at most `tenants` tenants."""

    __slots__ = ("_lock", "_order", "_size", "tables", "tenants", "total")

    def __init__(self, total: int, tenants: int = 1024) -> None:
        self.total, self.tenants = total, tenants
        self.tables: dict[Hashable, dict[K, V]] = {}  # read lock-free; changed here only
        self._order: dict[Hashable, None] = {}  # tenants by their last put, oldest first
        self._size = 0
        self._lock = threading.Lock()

    def get(self, tenant: Hashable, key: K) -> V | None:
        table = self.tables.get(tenant)
        return table.get(key) if table is not None else None

    def put(self, tenant: Hashable, key: K, value: V) -> None:
        self.put_many(tenant, ((key, value),))

    def put_many(self, tenant: Hashable, items: Iterable[tuple[K, V]]) -> None:
        with self._lock:
            tables, order = self.tables, self._order
            table = tables.get(tenant)
            if table is None:
                if len(tables) >= self.tenants:
                    self._drop(next(iter(order)))
                table = tables[tenant] = {}
            order.pop(tenant, None)
            order[tenant] = None
            for key, value in items:
                if key not in table:
                    if self._size >= self.total:
                        table = self._make_room(tenant, table)
                    self._size += 1
                table[key] = value

    def _make_room(self, tenant: Hashable, table: dict[K, V]) -> dict[K, V]:
        """Drop the tenant holding the most (`tenant` itself on a tie); `tenant`'s
        table, a fresh one when that was its own."""
        most, held = tenant, len(table)
        for other, t in self.tables.items():
            if len(t) > held:
                most, held = other, len(t)
        self._drop(most)
        if most is tenant:
            table = self.tables[tenant] = {}
            self._order[tenant] = None
        return table

    def _drop(self, tenant: Hashable) -> None:
        table = self.tables.pop(tenant, None)
        self._order.pop(tenant, None)
        if table is not None:
            self._size -= len(table)

    def discard(self, tenant: Hashable, key: K) -> None:
        with self._lock:
            table = self.tables.get(tenant)
            if table is not None and key in table:
                del table[key]
                self._size -= 1

    def drop(self, tenant: Hashable) -> None:
        """Forget `tenant`'s entries."""
        with self._lock:
            self._drop(tenant)

    def held(self, tenant: Hashable) -> int:
        """How many entries `tenant` holds."""
        table = self.tables.get(tenant)
        return len(table) if table is not None else 0

    def __len__(self) -> int:
        return self._size


__all__ = ["Shares"]
