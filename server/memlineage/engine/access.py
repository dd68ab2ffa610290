"""Reads are counted in memory and written to the store in batches.

Recording an access on every read would cost a store write per decision (a
round trip on Redis, a cache invalidation on the embedded store). Reads are
summed per (namespace, memory) — count and latest time — and flushed through
`record_accesses` every `access_flush_seconds` (2 s by default) by the server,
before a sweep or Explain, on shutdown, and whenever many are pending. Access
statistics are therefore at most one flush interval late.

A namespace whose batch the store refuses as damaged (StoreCorruptError, DATA_LOSS:
a record it cannot read or write) is logged with the key and its batch dropped:
a flush writes every namespace, and the flush before one namespace's Explain or
sweep must not fail it, nor name another namespace's key to its caller. Retrying
would meet the same damage at every flush; the counts are statistics, not lineage.

A store that does not answer (StoreUnavailableError) keeps the sums it was not given
for the next flush, merged with what is read meanwhile, and the error is raised (the
server logs the outage once): nothing read before an outage is lost to it. The flush
a read makes when many are pending does not raise it: a store that refuses writes but
reads (the embedded store on a full disk) still answers the read. A batch
whose answer was lost on the way back (the connection cut after Redis applied it) is
then counted twice: an access count may run over, never under.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Iterable

from memlineage.engine.fault_log import FaultLog
from memlineage.lineage.errors import StoreCorruptError, StoreUnavailableError
from memlineage.store.base import LineageStore

log = logging.getLogger("memlineage.engine")


class AccessBuffer:
    """Reads are queued as they come (one deque append: thread-safe, no lock, nothing
    summed on the request path) and summed per memory when flushed."""

    def __init__(self, store: LineageStore, max_pending: int = 10_000) -> None:
        self.store = store
        self.max_pending = max_pending
        self._queue: deque[tuple[str, Iterable[str], float]] = deque()
        # Sums a store that did not answer was not given: the next flush starts from them.
        self._retry: dict[str, dict[str, tuple[int, float]]] = {}
        self._flushing = threading.Lock()
        self._faults = FaultLog(log)  # a damaged namespace fails every flush: said once

    def add(self, namespace: str, ids: Iterable[str], now: float) -> None:
        """`ids` must not change afterwards (the engine passes tuples)."""
        queue = self._queue
        queue.append((namespace, ids, now))
        if len(queue) >= self.max_pending:
            # a store that refuses writes (a full disk) keeps the sums for the next
            # flush, which reports it: the read that found the queue full is answered
            with contextlib.suppress(StoreUnavailableError):
                self.flush()

    def pending(self) -> int:
        """Reads queued, plus memories whose sums wait for a store that did not answer."""
        return len(self._queue) + sum(len(acc) for acc in self._retry.values())

    def flush(self) -> int:
        """Write everything pending; returns how many memories were updated. Raises
        StoreUnavailableError when the store did not answer (kept for the next flush)."""
        with self._flushing:  # one flusher at a time: sums are not split across two
            queue, popleft = self._queue, self._queue.popleft
            summed, self._retry = self._retry, {}
            for _ in range(len(queue)):  # what is queued now; later adds wait their turn
                namespace, ids, now = popleft()
                acc = summed.get(namespace)
                if acc is None:
                    acc = summed[namespace] = {}
                get = acc.get
                for memory_id in ids:
                    count, last = get(memory_id, (0, now))
                    acc[memory_id] = (count + 1, now if now > last else last)  # max
            written = 0
            batches = list(summed.items())
            for k, (ns, acc) in enumerate(batches):
                try:
                    written += self.store.record_accesses(ns, acc)
                    self._faults.cleared(ns, f"access statistics of {ns!r} are written again")
                except StoreUnavailableError:
                    self._retry = dict(batches[k:])  # this namespace's and the rest's
                    raise
                except StoreCorruptError as exc:
                    message = (
                        f"access statistics of {len(acc)} memories of namespace {ns!r} "
                        f"dropped: {exc}"
                    )
                    self._faults.failed(ns, str(exc), message)
            return written
