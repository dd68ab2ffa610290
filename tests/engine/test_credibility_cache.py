"""The credibility cache (engine/credibility.py) is shared by namespaces: one naming
many distinct sources evicts its own entries, never another namespace's (an outside
audit: the cache was cleared whole past 100,000 entries, by whichever namespace
filled it, so that every other one asked the store again)."""

from __future__ import annotations

from memlineage.engine import credibility
from memlineage.engine.credibility import CredibilityCache
from memlineage.scoring.config import ScoringConfig

WHOLE = 100_000  # entries the cache keeps in all


class CountingStats:
    """A store of source statistics, counting the sources it is asked for."""

    epoch = None

    def __init__(self) -> None:
        self.asked: list[str] = []

    def source_stats(self, namespace: str, sources: list[str]) -> dict[str, tuple[float, float]]:
        self.asked.extend(sources)
        return {s: (1.0, 0.0) for s in sources}


def test_a_namespace_naming_many_sources_evicts_only_its_own() -> None:
    store = CountingStats()
    cache = CredibilityCache(store, ScoringConfig())  # type: ignore[arg-type]
    mine = cache.credibility("tenant-b", ["user:bob"], epoch=1)
    assert store.asked == ["user:bob"]
    half = WHOLE * 6 // 10
    for batch in range(3):  # more than the whole, in distinct sources
        cache.credibility("tenant-a", [f"tool:{batch}-{i}" for i in range(half)], epoch=1)
    asked = len(store.asked)
    assert cache.credibility("tenant-b", ["user:bob"], epoch=1) == mine
    assert len(store.asked) == asked  # tenant-b's entry is still cached
    assert cache.held("tenant-b") == 1 and cache.held("tenant-a") < WHOLE == credibility.LIMIT


def test_invalidation_is_per_namespace_and_source() -> None:
    store = CountingStats()
    cache = CredibilityCache(store, ScoringConfig())  # type: ignore[arg-type]
    for ns in ("a", "b"):
        cache.stats(ns, ["x", "y"], epoch=1)
    cache.invalidate("a", ["x"])
    assert (cache.held("a"), cache.held("b")) == (1, 2)
    cache.invalidate_namespace("b")
    assert (cache.held("a"), cache.held("b")) == (1, 0)
    del store.asked[:]
    cache.stats("a", ["x", "y"], epoch=1)
    assert store.asked == ["x"]
