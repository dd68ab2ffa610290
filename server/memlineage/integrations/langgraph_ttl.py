"""`GuardedLangGraphStore`'s TTL sweeper: the wrapped store's own, passed through.

LangGraph's TTL stores (`SqliteStore`, `AsyncSqliteStore`, `PostgresStore`) delete
expired items in ``sweep_ttl`` and a sweeper they run with ``start_ttl_sweeper``;
an application (or a server) calls these on the store it was given, the wrapper.
Expiry is the store's own rule, asked of nobody, as in the bare store: a swept
item's lineage record stays in the sidecar, as after a delete. A store without a
sweeper (`InMemoryStore`) raises the AttributeError it raises bare.
"""

from __future__ import annotations

from typing import Any


class TTLSweeper:
    """The sweeper methods of the wrapped store ``self.store``, called on it (the
    async stores' are coroutines, returned to be awaited)."""

    store: Any

    def sweep_ttl(self) -> Any:
        """The wrapped store's ``sweep_ttl()``: its expired items deleted, their count."""
        return self.store.sweep_ttl()

    def start_ttl_sweeper(self, sweep_interval_minutes: int | None = None) -> Any:
        """The wrapped store's ``start_ttl_sweeper``."""
        return self.store.start_ttl_sweeper(sweep_interval_minutes)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> Any:
        """The wrapped store's ``stop_ttl_sweeper``."""
        return self.store.stop_ttl_sweeper(timeout)
