"""Source credibility per namespace, cached in the sidecar.

Credibility moves only when claims are confirmed or contradicted and on usage
feedback; reading the statistics on every decision would cost a store round
trip. An entry remembers the namespace's write counter it was read under
(`LineageStore.epochs`): a caller that read the counter passes it and gets only
entries read under the same count, so what it derives is exact for that count
(decision reuse keeps decisions under it). Without a counter an entry lives
`ttl` seconds (monotonic time), dropped at once when this sidecar changes the
statistics; another sidecar's changes then show within `ttl`. A read that raced
such a change (its statistics read before the change, kept after the drop) is not
kept: each drop moves a generation, and what was read under an older one is used
by its own request only (kept, it made the next decisions of this sidecar, taken
after the change was acknowledged, use the statistics from before it for `ttl`).

The entries are shared by namespaces (`engine/shares.py`): a namespace naming many
distinct sources evicts its own entries, never another namespace's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from memlineage.engine.shares import Shares
from memlineage.scoring.batch import credibilities
from memlineage.scoring.config import ScoringConfig
from memlineage.store.base import LineageStore

# (expires, ok, bad, write counter read under, credibility), per namespace and source
Entry = tuple[float, float, float, int | None, float]
LIMIT = 100_000  # entries kept in all, shared by the namespaces
NAMESPACES_LIMIT = 1024  # namespaces tracked at once


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
        self._shares: Shares[str, Entry] = Shares(LIMIT, NAMESPACES_LIMIT)
        # moved by every drop (`invalidate`), under `_keeping` with what a fetch keeps
        self._generation = 0
        self._keeping = threading.Lock()

    def _lookup(
        self,
        namespace: str,
        sources: Iterable[str],
        epoch: int | None,
    ) -> tuple[dict[str, Entry], list[str], float, int | None, int]:
        """The cached entries of `sources` still valid, the sources missing, the time
        and the epoch they are judged by, and the generation (read before the store
        is). `epoch`: the namespace's write counter, read before this call (None: the
        store's own, when all its writers are here)."""
        generation = self._generation
        now = self._monotonic()
        if epoch is None:
            epoch = self.store.epoch  # a store whose writers are all in this process
        found: dict[str, Entry] = {}
        missing: list[str] = []
        entries = self._shares.tables.get(namespace)
        if entries is None:
            return found, list(sources), now, epoch, generation
        for s in sources:
            hit = entries.get(s)
            if hit is not None and (hit[3] == epoch if epoch is not None else hit[0] > now):
                found[s] = hit
            else:
                missing.append(s)
        return found, missing, now, epoch, generation

    def _fetch(
        self,
        namespace: str,
        missing: list[str],
        now: float,
        epoch: int | None,
        generation: int,
    ) -> dict[str, Entry]:
        """One store call for the `missing` sources, kept with their credibility (kept
        for `ttl`, without a counter: unless a drop came since `generation` was read,
        as the read may predate the change it dropped for)."""
        fresh = self.store.source_stats(namespace, missing)
        cred = credibilities(self.cfg, fresh)
        expires = now + self.ttl
        out = {s: (expires, ok, bad, epoch, cred[s]) for s, (ok, bad) in fresh.items()}
        if epoch is not None:  # exact for the counter read before the store was
            self._shares.put_many(namespace, out.items())
            return out
        with self._keeping:
            if self._generation == generation:
                self._shares.put_many(namespace, out.items())
        return out

    def stats(
        self, namespace: str, sources: Iterable[str], epoch: int | None = None
    ) -> dict[str, tuple[float, float]]:
        """(ok, bad) per source, from the cache or one store call for the missing.
        `epoch`: the namespace's write counter, read before this call."""
        found, missing, now, epoch, generation = self._lookup(namespace, sources, epoch)
        if missing:
            found.update(self._fetch(namespace, missing, now, epoch, generation))
        return {s: (e[1], e[2]) for s, e in found.items()}

    def credibility(
        self, namespace: str, sources: Iterable[str], epoch: int | None = None
    ) -> dict[str, float]:
        """Credibility per source, computed once per statistics read (the decisions'
        path: no formula per request)."""
        found, missing, now, epoch, generation = self._lookup(namespace, sources, epoch)
        if missing:
            found.update(self._fetch(namespace, missing, now, epoch, generation))
        return {s: e[4] for s, e in found.items()}

    def invalidate(self, namespace: str, sources: Iterable[str]) -> None:
        """After this sidecar changed the statistics of `sources` (before the change is
        acknowledged): a fetch under way when it was written is not kept either."""
        with self._keeping:
            self._generation += 1
            for s in sources:
                self._shares.discard(namespace, s)

    def invalidate_namespace(self, namespace: str) -> None:
        """A recorded claim can move several sources' statistics at once."""
        with self._keeping:
            self._generation += 1
            self._shares.drop(namespace)

    def held(self, namespace: str) -> int:
        """How many sources of `namespace` are cached."""
        return self._shares.held(namespace)
