"""Store records -> the facts and lineage snapshot the policy evaluator reads.

One `lineage_view` read (a round trip per BFS level) feeds every decision of a
request or batch; rate counters are read lazily, once per (source, window).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import cast

from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts
from memlineage_dsl.lineage_bound import Bound

from memlineage.engine.shares import Shares
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.lineage.model import MemoryRecord
from memlineage.scoring.batch import Scores
from memlineage.store.base import LineageStore

_CREATORS: dict[tuple[str, str], Creator] = {}


def _creator(kind: str, cid: str) -> Creator:
    """Creators are few and immutable: share one object per (kind, id)."""
    hit = _CREATORS.get((kind, cid))
    if hit is None:
        if len(_CREATORS) > 100_000:
            _CREATORS.clear()
        hit = _CREATORS[(kind, cid)] = Creator(kind, cid)
    return hit


def to_facts(rec: MemoryRecord, now: float) -> MemoryFacts:
    """What policies see of a stored (or proposed) record. On every decision's path:
    positional construction, no per-field copies of what is already immutable."""
    deps = cast(tuple[str, ...], rec.dependencies)  # ids, unless refs: normalised here
    if deps and not all(type(d) is str for d in deps):
        deps = tuple(str(getattr(d, "id", d)) for d in deps)
    return MemoryFacts(
        rec.id,
        rec.namespace,
        rec.type,
        tuple(rec.tags),
        rec.subject or "",  # a string never set is "" to policies (MemoryFacts)
        rec.attribute or "",
        rec.value or "",
        rec.volatility or "",
        _creator(rec.creator_kind, rec.creator_id),
        rec.creator_confidence,
        rec.created_at if rec.created_at is not None else now,
        rec.context_id or "",
        rec.status,
        rec.version,
        rec.successor or "",
        deps,
        1.0,
        1.0,
        rec.status,
        len(rec.contradicted_by),
        len(rec.confirmed_by),
        rec.access_count,
        rec.last_access,
        True,
    )


def calls_counter(source: str) -> str:
    """The store counter that counts calls of a source (recorded memories it made)."""
    return f"calls:{source}"


@functools.lru_cache(maxsize=1024)  # the patterns of the policy sets: worked out once each
def acts_counter(pattern: str | tuple[str, ...]) -> str:
    """The store counter of allowed actions matching `pattern` (a glob or a list of
    them, as `acts()` names it): the engine counts an allowed action under every
    pattern of the serving set and of a loaded shadow candidate it matches
    (`CompiledPolicySet.counts_action`).
    Keyed by the set of globs, so a list reordered, repeated or of one glob counts on
    where it was: a policy edit that keeps what the pattern matches keeps its count."""
    globs = sorted({pattern} if isinstance(pattern, str) else set(pattern))
    text = json.dumps(globs[0] if len(globs) == 1 else globs)
    return "acts:" + hashlib.sha256(text.encode()).hexdigest()[:24]


class StoreSnapshot(DictSnapshot):
    """A DictSnapshot over records read from a store, with live rate counters."""

    def __init__(
        self,
        facts: Iterable[MemoryFacts] | dict[str, MemoryFacts],
        store: LineageStore,
        namespace: str,
    ) -> None:
        if isinstance(facts, dict):  # already by id (snapshot_of): taken as is
            super().__init__()
            self.memories = facts
        else:
            super().__init__(facts)
        self._store = store
        self._namespace = namespace
        self._counts: dict[tuple[str, float], tuple[int, float]] = {}
        self.store_failed = False  # a counter read hit an unavailable store
        # The scores its facts carry as computed (`snapshot_of`); one left out (no
        # policy of the operation reads it) is at its default 1.0 (`decision_input`
        # logs which: a replay by a set that reads it would be approximate).
        self.scored: frozenset[str] = SCORES
        # Whether the horizon is wanted: only a decision that may be kept for reuse
        # works out when its time-dependent tests would flip (`EngineBase._bound`
        # turns it on); the others (writes, acts, reuse off) are tested with plain
        # comparisons (`OpPlan.test_fixed`).
        self.timed = False
        # The records the facts were made of (`snapshot_of`): their derivations, for a
        # descendant walk past the loaded `bound`
        self.records: Mapping[str, MemoryRecord] = {}
        self._present: set[str] = set()  # ids `stored` found held

    def derivations(self, memory_id: str) -> tuple[str, ...]:
        rec = self.records.get(memory_id)
        return () if rec is None else rec.derivations

    def stored(self, memory_id: str) -> bool:
        """Asked of the store, once per id, only when a walk meets a neighbour past the
        bound: a dangling id there (an older or damaged store) is skipped as it is
        within the bound, not reported as lineage to load. A decision that read an
        absence is not kept for reuse: the id may be recorded at any time."""
        if memory_id in self.absent:
            self.horizon = -math.inf
            return False
        if memory_id not in self._present:
            try:
                held = self._store.get_many(self._namespace, [memory_id])
            except StoreUnavailableError:
                self.store_failed = True
                raise
            if memory_id not in held:
                self.absent.add(memory_id)
                self.horizon = -math.inf
                return False
            self._present.add(memory_id)
        return True

    def note(self, kind: str, q: object, c: object, now: float) -> None:
        if self.timed:
            super().note(kind, q, c, now)

    def counts_read(self) -> dict[tuple[str, float], tuple[int, float]]:
        """Every (counter, window) evaluation read, with (count, until): what a replay
        of the decision needs (`decision_input`)."""
        return dict(self._counts)

    @property
    def counted(self) -> bool:
        """Whether evaluation read a rate counter (a decision then depends on them)."""
        return bool(self._counts)

    def calls(self, source: str | Creator, window_seconds: float, now: float) -> int:
        source = str(source)  # a creator stands for its id: `calls(memory.creator, 1h)`
        key = (source, window_seconds)
        hit = self._counts.get(key)
        if hit is None:
            if any(c in source for c in "*?["):
                raise ValueError("calls() on the server counts one exact source, not a glob")
            try:
                hit = self._counts[key] = self._store.count_until(
                    self._namespace, calls_counter(source), window_seconds, now=now
                )
            except StoreUnavailableError:
                self.store_failed = True  # the engine applies its fail mode, not fail-closed
                raise
        self.until(hit[1])  # every decision that reads the count, not only the first
        return hit[0]

    def acts(self, pattern: str | tuple[str, ...], window_seconds: float, now: float) -> int:
        key = (acts_counter(pattern), window_seconds)
        hit = self._counts.get(key)
        if hit is None:
            try:
                hit = self._counts[key] = self._store.count_until(
                    self._namespace, key[0], window_seconds, now=now
                )
            except StoreUnavailableError:
                self.store_failed = True
                raise
        self.until(hit[1])
        return hit[0]


SCORES = frozenset({"reliability", "value_score"})
"""The scores a memory's facts carry (computed per request)."""
_SCORED = {
    (True, True): SCORES,
    (True, False): frozenset({"reliability"}),
    (False, True): frozenset({"value_score"}),
    (False, False): frozenset(),
}
"""`StoreSnapshot.scored` by (reliability computed, value computed)."""

# Facts of records a store hands out as shared immutable objects (the embedded
# store returns the same MemoryRecord until its row changes): built once per
# record object and per (reliability, value_score), then shared read-only by the
# requests that load that record. Never mutated once published here. Kept per
# namespace (`engine/shares.py`): one loading many records evicts its own facts.
# Keyed by memory id, the entry holding the record object it was built for: keyed by
# the object (`id(rec)`), every version of a changed record stayed pinned until
# evicted, and a memory gaining children is a new version with one more derivation
# each time: 20,000 children of one memory held ~1.7 GB (an outside audit).
_FACTS_LIMIT = 100_000
_FACTS: Shares[str, tuple[MemoryRecord, MemoryFacts]] = Shares(_FACTS_LIMIT)
_NO_FACTS: dict[str, tuple[MemoryRecord, MemoryFacts]] = {}  # never written


def snapshot_of(
    records: Mapping[str, MemoryRecord],
    store: LineageStore,
    namespace: str,
    now: float,
    extra: Iterable[MemoryFacts] = (),
    scores: Scores | None = None,
    reads: frozenset[str] | None = None,
    bound: Bound | None = None,
) -> tuple[StoreSnapshot, dict[str, MemoryFacts]]:
    """Facts of `records` (+ `extra`) with the request's scores, and their snapshot.

    With `reads` (the attributes the operation's policies read), a score no policy
    reads is left at its default: it cannot change the decision. `bound`: how far
    `records` hold the lineage (`EngineBase._view`): a walk past it fails its rule."""
    rel = (
        scores.reliability
        if scores is not None and (reads is None or "reliability" in reads)
        else None
    )
    val = scores.value if scores is not None and (reads is None or "value_score" in reads) else None
    facts: dict[str, MemoryFacts] = {}
    if store.shares_records:
        cache = _FACTS.tables.get(namespace, _NO_FACTS)
        built: list[tuple[str, tuple[MemoryRecord, MemoryFacts]]] = []
        for rid, rec in records.items():
            r = rel.get(rid, 1.0) if rel is not None else 1.0
            v = val.get(rid, 1.0) if val is not None else 1.0
            hit = cache.get(rid)
            if hit is not None and hit[0] is rec:
                f = hit[1]
                # 0.0 == -0.0: a zero is never taken from the cache
                if f.reliability == r and f.value_score == v and r and v:
                    facts[rid] = f
                    continue
            f = to_facts(rec, now)
            f.reliability = r
            f.value_score = v
            facts[rid] = f
            if rec.created_at is not None:  # else the facts depend on `now`
                built.append((rid, (rec, f)))
        if built:
            _FACTS.put_many(namespace, built)
    else:
        for rid, rec in records.items():
            f = facts[rid] = to_facts(rec, now)
            if rel is not None:
                f.reliability = rel.get(rid, 1.0)
            if val is not None:
                f.value_score = val.get(rid, 1.0)
    for f in extra:
        facts[f.id] = f
        if rel is not None:
            f.reliability = rel.get(f.id, f.reliability)
        if val is not None:
            f.value_score = val.get(f.id, f.value_score)
    snap = StoreSnapshot(facts, store, namespace)
    if bound is not None:
        snap.bound = bound
        snap.records = records
    if rel is None or val is None:
        snap.scored = _SCORED[rel is not None, val is not None]
    return snap, facts
