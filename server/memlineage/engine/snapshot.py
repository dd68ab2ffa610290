"""Store records -> the facts and lineage snapshot the policy evaluator reads.

One `lineage_view` read (a round trip per BFS level) feeds every decision of a
request or batch; rate counters are read lazily, once per (source, window).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts

from memlineage.lineage.model import MemoryRecord
from memlineage.scoring.batch import Scores
from memlineage.store.base import LineageStore


def to_facts(rec: MemoryRecord, now: float) -> MemoryFacts:
    """What policies see of a stored (or proposed) record."""
    return MemoryFacts(
        id=rec.id,
        namespace=rec.namespace,
        type=rec.type,
        tags=tuple(rec.tags),
        subject=rec.subject,
        attribute=rec.attribute,
        value=rec.value,
        volatility=rec.volatility,  # type: ignore[arg-type]
        creator=Creator(rec.creator_kind, rec.creator_id),
        confidence=rec.creator_confidence,
        created_at=rec.created_at if rec.created_at is not None else now,
        context_id=rec.context_id,
        status=rec.status,
        version=rec.version,
        successor=rec.successor,
        dependencies=tuple(str(getattr(d, "id", d)) for d in rec.dependencies),
        state=rec.status,
        access_count=rec.access_count,
        last_access=rec.last_access,
        contradictions=len(rec.contradicted_by),
        confirmations=len(rec.confirmed_by),
    )


def calls_counter(source: str) -> str:
    """The store counter that counts calls of a source (recorded memories it made)."""
    return f"calls:{source}"


class StoreSnapshot(DictSnapshot):
    """A DictSnapshot over records read from a store, with live rate counters."""

    def __init__(
        self,
        facts: Iterable[MemoryFacts],
        store: LineageStore,
        namespace: str,
    ) -> None:
        super().__init__(facts)
        self._store = store
        self._namespace = namespace
        self._counts: dict[tuple[str, float], int] = {}

    def calls(self, source: str, window_seconds: float, now: float) -> int:
        key = (source, window_seconds)
        hit = self._counts.get(key)
        if hit is None:
            if any(c in source for c in "*?["):
                raise ValueError("calls() on the server counts one exact source, not a glob")
            hit = self._counts[key] = self._store.count(
                self._namespace, calls_counter(source), window_seconds, now=now
            )
        return hit


def snapshot_of(
    records: Mapping[str, MemoryRecord],
    store: LineageStore,
    namespace: str,
    now: float,
    extra: Iterable[MemoryFacts] = (),
    scores: Scores | None = None,
) -> tuple[StoreSnapshot, dict[str, MemoryFacts]]:
    facts = {rid: to_facts(rec, now) for rid, rec in records.items()}
    for f in extra:
        facts[f.id] = f
    if scores is not None:
        for rid, f in facts.items():
            f.reliability = scores.reliability.get(rid, f.reliability)
            f.value_score = scores.value.get(rid, f.value_score)
    return StoreSnapshot(facts.values(), store, namespace), facts
