"""Reads are counted in memory and written to the store in batches.

Recording an access on every read would cost a store write per decision (a
round trip on Redis, a cache invalidation on the embedded store). Reads are
summed per (namespace, memory) — count and latest time — and flushed through
`record_accesses` every half second by the server, before a sweep or Explain,
on shutdown, and whenever many are pending. Access statistics are therefore at
most one flush interval late.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from memlineage.store.base import LineageStore


class AccessBuffer:
    def __init__(self, store: LineageStore, max_pending: int = 10_000) -> None:
        self.store = store
        self.max_pending = max_pending
        self._pending: dict[str, dict[str, tuple[int, float]]] = {}
        self._size = 0
        self._lock = threading.Lock()

    def add(self, namespace: str, ids: Iterable[str], now: float) -> None:
        with self._lock:
            acc = self._pending.get(namespace)
            if acc is None:
                acc = self._pending[namespace] = {}
            get = acc.get
            added = 0
            for memory_id in ids:
                count, last = get(memory_id, (0, now))
                acc[memory_id] = (count + 1, now if now > last else last)  # max(last, now)
                added += 1
            self._size += added
            full = self._size >= self.max_pending
        if full:
            self.flush()

    def flush(self) -> int:
        """Write everything pending; returns how many memories were updated."""
        with self._lock:
            pending, self._pending, self._size = self._pending, {}, 0
        return sum(self.store.record_accesses(ns, acc) for ns, acc in pending.items() if acc)
