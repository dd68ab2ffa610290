"""The score inputs of memories as numpy columns: what ``scoring.batch`` scores from.

They describe memories, not storage: a store answers ``score_columns`` with them
(the embedded store from its columnar mirror, the others via ``score_columns_of``)
and the scoring reads them without knowing which store produced them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memlineage.lineage.model import MemoryRecord


@dataclass(frozen=True, slots=True)
class ScoreColumns:
    """The score inputs of some memories as numpy arrays, one element per id (in
    ``ids`` order; missing ids are omitted), for ``scoring.batch.score_columns``.

    Strings are interned: ``creator``, ``confirm_source`` and ``contradict_source``
    index ``sources``; ``volatility`` indexes ``volatilities`` (None included);
    ``type`` indexes ``types``.  A time that is None is NaN.  Confirmations and
    contradictions are (row, source) pairs: ``confirm_row[k]`` is the position in
    ``ids`` of the memory that ``sources[confirm_source[k]]`` confirmed.  The name
    tables may be shared with the store (append-only): read them, never modify.
    """

    ids: list[str]
    confidence: NDArray[np.float64]
    created_at: NDArray[np.float64]
    last_access: NDArray[np.float64]
    access_count: NDArray[np.float64]
    uses_ok: NDArray[np.float64]
    uses_failed: NDArray[np.float64]
    derivations: NDArray[np.float64]
    volatility: NDArray[np.int64]
    type: NDArray[np.int64]
    creator: NDArray[np.int64]
    confirm_row: NDArray[np.int64]
    confirm_source: NDArray[np.int64]
    contradict_row: NDArray[np.int64]
    contradict_source: NDArray[np.int64]
    sources: Sequence[str]
    volatilities: Sequence[str | None]
    types: Sequence[str]

    def decoded(self) -> dict[str, list[Any]]:
        """Plain values with the names put back (interning-independent; for tests)."""

        def times(a: NDArray[np.float64]) -> list[float | None]:
            return [None if math.isnan(x) else x for x in a.tolist()]

        src = self.sources
        return {
            "ids": list(self.ids),
            "confidence": self.confidence.tolist(),
            "created_at": times(self.created_at),
            "last_access": times(self.last_access),
            "access_count": self.access_count.tolist(),
            "uses_ok": self.uses_ok.tolist(),
            "uses_failed": self.uses_failed.tolist(),
            "derivations": self.derivations.tolist(),
            "volatility": [self.volatilities[i] for i in self.volatility.tolist()],
            "type": [self.types[i] for i in self.type.tolist()],
            "creator": [src[i] for i in self.creator.tolist()],
            "confirmed": [
                (r, src[s])
                for r, s in zip(
                    self.confirm_row.tolist(), self.confirm_source.tolist(), strict=True
                )
            ],
            "contradicted": [
                (r, src[s])
                for r, s in zip(
                    self.contradict_row.tolist(), self.contradict_source.tolist(), strict=True
                )
            ],
        }


def score_columns_of(records: Iterable[MemoryRecord]) -> ScoreColumns:
    """ScoreColumns built from records (a Python pass over their attributes)."""
    recs = list(records)
    sources: dict[str, int] = {}
    vols: dict[str | None, int] = {}
    types: dict[str, int] = {}
    nan = math.nan
    pairs: dict[str, tuple[list[int], list[int]]] = {"c": ([], []), "x": ([], [])}
    for j, r in enumerate(recs):
        for key, names in (("c", r.confirmed_by), ("x", r.contradicted_by)):
            rows, srcs = pairs[key]
            for s in names:
                rows.append(j)
                srcs.append(sources.setdefault(s, len(sources)))

    def ints(xs: list[int]) -> NDArray[np.int64]:
        return np.array(xs, dtype=np.int64)

    def floats(xs: Iterable[Any]) -> NDArray[np.float64]:
        return np.array(list(xs), dtype=np.float64)

    return ScoreColumns(
        ids=[r.id for r in recs],
        confidence=floats(r.creator_confidence for r in recs),
        created_at=floats(nan if r.created_at is None else r.created_at for r in recs),
        last_access=floats(nan if r.last_access is None else r.last_access for r in recs),
        access_count=floats(r.access_count for r in recs),
        uses_ok=floats(r.uses_ok for r in recs),
        uses_failed=floats(r.uses_failed for r in recs),
        derivations=floats(len(r.derivations) for r in recs),
        volatility=ints([vols.setdefault(r.volatility, len(vols)) for r in recs]),
        type=ints([types.setdefault(r.type, len(types)) for r in recs]),
        creator=ints([sources.setdefault(r.creator_id, len(sources)) for r in recs]),
        confirm_row=ints(pairs["c"][0]),
        confirm_source=ints(pairs["c"][1]),
        contradict_row=ints(pairs["x"][0]),
        contradict_source=ints(pairs["x"][1]),
        sources=list(sources),
        volatilities=list(vols),
        types=list(types),
    )
