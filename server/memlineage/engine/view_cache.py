"""Lineage views kept between fresh decisions, on a store that stamps every change
per memory (the embedded store: `LineageStore.change_mark` / `unchanged_since`).

A Check of one memory reads its record and lineage (`EngineBase._view`) and scores
them; most of that is the same the next time the memory is asked about. A view is
kept with the change mark taken before it was read and is used again only while
none of its records, nor the source statistics (credibility) of their sources (the
creator and the sources that confirmed or contradicted it), changed
since: what a fresh read would return. The decision itself is always taken again
(this is not decision reuse: reuse off still decides every request). Its scores are
kept too when nothing in them depends on the time: no record decays and no value
score was asked for (value decays with idle time).

The views are shared by namespaces (`engine/shares.py`): a namespace asking about
many distinct memories evicts its own views, never another namespace's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memlineage.engine.shares import Shares
from memlineage.lineage.model import MemoryRecord
from memlineage.scoring.batch import Scores
from memlineage.scoring.config import ScoringConfig
from memlineage.store.base import LineageStore

# (namespace, memory id, ancestor depth, descendant depth, access statistics read)
ViewKey = tuple[str, str, int, int, bool]
LIMIT = 50_000  # views kept in all, shared by the namespaces
NAMESPACES_LIMIT = 1024  # namespaces tracked at once


@dataclass(frozen=True, slots=True)
class KeptView:
    mark: int  # the store's change mark, taken before the view was read
    records: dict[str, MemoryRecord]  # shared: never mutated
    scores: Scores | None  # exact at any time (see the module), else None
    scoring: ScoringConfig  # the configuration the scores were computed with


class ViewCache:
    """Kept views by (namespace, memory, depths, access); `get` answers one only while
    the store says nothing it holds changed since its mark."""

    def __init__(self, store: LineageStore) -> None:
        self.store = store
        self._shares: Shares[ViewKey, KeptView] = Shares(LIMIT, NAMESPACES_LIMIT)
        self._tables = self._shares.tables

    def get(self, key: ViewKey) -> KeptView | None:
        table = self._tables.get(key[0])
        kept = table.get(key) if table is not None else None
        if kept is None:
            return None
        if self.store.unchanged_since(key[0], kept.records, kept.mark, access=key[4]):
            return kept
        self._shares.discard(key[0], key)
        return None

    def held(self, namespace: str) -> int:
        """How many views of `namespace` are kept."""
        return self._shares.held(namespace)

    def keep(
        self,
        key: ViewKey,
        mark: int,
        records: dict[str, MemoryRecord],
        scores: Scores | None,
        scoring: ScoringConfig,
    ) -> None:
        """Keep a view read after `mark`, with its `scores` when they are timeless."""
        half_life = scoring.half_life
        timeless = (
            scores is not None
            and not scores.value
            and all(half_life(r.volatility) == math.inf for r in records.values())
        )
        self._shares.put(
            key[0], key, KeptView(mark, records, scores if timeless else None, scoring)
        )


__all__ = ["KeptView", "ViewCache", "ViewKey"]
