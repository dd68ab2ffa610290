"""Source credibility per namespace, cached in the sidecar.

Credibility moves only when claims are confirmed or contradicted and on usage
feedback; reading the statistics on every decision would cost a store round
trip. An entry remembers the namespace's write counter it was read under
(`LineageStore.epochs`): a caller that read the counter passes it and gets only
entries read under the same count, so what it derives is exact for that count
(decision reuse keeps decisions under it). Without a counter an entry lives
`ttl` seconds (monotonic time), dropped at once when this sidecar changes the
statistics; another sidecar's changes then show within `ttl`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from memlineage.scoring.batch import credibilities
from memlineage.scoring.config import ScoringConfig
from memlineage.store.base import LineageStore


class CredibilityCache:
    def __init__(
        self,
        store: LineageStore,
        cfg: ScoringConfig,
        ttl: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.cfg, self.ttl = store, cfg, ttl
        self._monotonic = monotonic
        # (namespace, source) -> (expires, ok, bad, write counter read under, credibility)
        self._entries: dict[tuple[str, str], tuple[float, float, float, int | None, float]] = {}
        self._lock = threading.Lock()

    def _lookup(
        self,
        namespace: str,
        sources: Iterable[str],
        epoch: int | None,
    ) -> tuple[
        dict[str, tuple[float, float, float, int | None, float]], list[str], float, int | None
    ]:
        """The cached entries of `sources` still valid, the sources missing, the time
        and the epoch they are judged by. `epoch`: the namespace's write counter, read
        before this call (None: the store's own, when all its writers are here)."""
        now = self._monotonic()
        if epoch is None:
            epoch = self.store.epoch  # a store whose writers are all in this process
        found: dict[str, tuple[float, float, float, int | None, float]] = {}
        missing: list[str] = []
        entries = self._entries
        with self._lock:
            for s in sources:
                hit = entries.get((namespace, s))
                if hit is not None and (hit[3] == epoch if epoch is not None else hit[0] > now):
                    found[s] = hit
                else:
                    missing.append(s)
        return found, missing, now, epoch

    def _fetch(
        self,
        namespace: str,
        missing: list[str],
        now: float,
        epoch: int | None,
    ) -> dict[str, tuple[float, float, float, int | None, float]]:
        """One store call for the `missing` sources, kept with their credibility."""
        fresh = self.store.source_stats(namespace, missing)
        cred = credibilities(self.cfg, fresh)
        out: dict[str, tuple[float, float, float, int | None, float]] = {}
        with self._lock:
            if len(self._entries) > 100_000:
                self._entries.clear()
            for s, (ok, bad) in fresh.items():
                out[s] = self._entries[(namespace, s)] = (now + self.ttl, ok, bad, epoch, cred[s])
        return out

    def stats(
        self, namespace: str, sources: Iterable[str], epoch: int | None = None
    ) -> dict[str, tuple[float, float]]:
        """(ok, bad) per source, from the cache or one store call for the missing.
        `epoch`: the namespace's write counter, read before this call."""
        found, missing, now, epoch = self._lookup(namespace, sources, epoch)
        if missing:
            found.update(self._fetch(namespace, missing, now, epoch))
        return {s: (e[1], e[2]) for s, e in found.items()}

    def credibility(
        self, namespace: str, sources: Iterable[str], epoch: int | None = None
    ) -> dict[str, float]:
        """Credibility per source, computed once per statistics read (the decisions'
        path: no formula per request)."""
        found, missing, now, epoch = self._lookup(namespace, sources, epoch)
        if missing:
            found.update(self._fetch(namespace, missing, now, epoch))
        return {s: e[4] for s, e in found.items()}

    def invalidate(self, namespace: str, sources: Iterable[str]) -> None:
        with self._lock:
            for s in sources:
                self._entries.pop((namespace, s), None)

    def invalidate_namespace(self, namespace: str) -> None:
        """A recorded claim can move several sources' statistics at once."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == namespace]:
                del self._entries[key]
