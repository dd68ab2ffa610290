"""Source credibility per namespace, cached briefly in the sidecar.

Credibility moves only when claims are confirmed or contradicted and on usage
feedback; reading the statistics on every decision would cost a store round
trip, so they are kept for `ttl` seconds (monotonic time) and dropped at once
when this sidecar changes them. Another sidecar's changes show within `ttl`. A
store that counts its writes (`LineageStore.epoch`: embedded, where every writer
is in this process) keeps them exactly: any write empties the cache.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from memlineage.scoring.batch import credibilities
from memlineage.scoring.config import ScoringConfig
from memlineage.store.base import LineageStore


class CredibilityCache:
    def __init__(self, store: LineageStore, cfg: ScoringConfig, ttl: float = 1.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.store, self.cfg, self.ttl = store, cfg, ttl
        self._monotonic = monotonic
        self._entries: dict[tuple[str, str], tuple[float, float, float]] = {}
        self._lock = threading.Lock()
        self._epoch: int | None = None  # the store's write counter the entries were read at

    def stats(self, namespace: str, sources: Iterable[str]) -> dict[str, tuple[float, float]]:
        """(ok, bad) per source, from the cache or one store call for the missing."""
        now = self._monotonic()
        out: dict[str, tuple[float, float]] = {}
        missing: list[str] = []
        epoch = self.store.epoch
        with self._lock:
            if epoch != self._epoch:  # written since: nothing cached still holds
                self._entries.clear()
                self._epoch = epoch
            for s in sources:
                hit = self._entries.get((namespace, s))
                if hit is not None and hit[0] > now:
                    out[s] = (hit[1], hit[2])
                else:
                    missing.append(s)
        if missing:
            fresh = self.store.source_stats(namespace, missing)
            with self._lock:
                if len(self._entries) > 100_000:
                    self._entries.clear()
                for s, (ok, bad) in fresh.items():
                    self._entries[(namespace, s)] = (now + self.ttl, ok, bad)
                    out[s] = (ok, bad)
        return out

    def credibility(self, namespace: str, sources: Iterable[str]) -> dict[str, float]:
        stats = self.stats(namespace, sources)
        return credibilities(self.cfg, stats)

    def invalidate(self, namespace: str, sources: Iterable[str]) -> None:
        with self._lock:
            for s in sources:
                self._entries.pop((namespace, s), None)

    def invalidate_namespace(self, namespace: str) -> None:
        """A recorded claim can move several sources' statistics at once."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == namespace]:
                del self._entries[key]
