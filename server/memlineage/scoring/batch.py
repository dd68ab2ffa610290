"""Scores for a batch of stored records: one numpy pass, then the chain rule.

Credibility comes from the namespace's source statistics (prior per source
pattern + track record); reliability and value from `vectorized`; a derived
memory is then capped by the least reliable memory it rests on, among the
records loaded for the request (the lineage depth bounds how far that looks).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from memlineage.lineage.columns import ScoreColumns
from memlineage.lineage.model import MemoryRecord
from memlineage.scoring import formulas, vectorized
from memlineage.scoring.config import ScoringConfig

Memo = dict[str, tuple[MemoryRecord, float | None, tuple[float, ...] | None]]
"""`score`'s per memory id, for the record object it holds: the record, its clipped
confidence on the direct path (None: through numpy), its value inputs but the time
(None: they take the time). Keyed by the id, not the object's: a changed record
replaces its entry instead of pinning every earlier version (`snapshot._FACTS`); an
id of two namespaces only misses."""


@dataclass(frozen=True, slots=True)
class Scores:
    reliability: dict[str, float]
    value: dict[str, float]
    credibility: dict[str, float]  # per source


def sources_of(records: Mapping[str, MemoryRecord]) -> set[str]:
    """Every source whose credibility the batch needs: creators, confirmers, contradictors."""
    out: set[str] = set()
    for r in records.values():
        out.add(r.creator_id)
        if r.confirmed_by:
            out.update(r.confirmed_by)
        if r.contradicted_by:
            out.update(r.contradicted_by)
    return out


# Below this many, numpy's per-call overhead costs more than the arithmetic: the
# reference formulas (tested equal to 1e-9) score single decisions.
SMALL_BATCH = 24


def credibilities(cfg: ScoringConfig, stats: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    names = list(stats)
    if len(names) < SMALL_BATCH:
        return {s: formulas.credibility(cfg, s, ok, bad) for s, (ok, bad) in stats.items()}
    prior = np.array([cfg.prior(s) for s in names])
    ok = np.array([stats[s][0] for s in names], dtype=float)
    bad = np.array([stats[s][1] for s in names], dtype=float)
    return dict(zip(names, vectorized.credibility(cfg, prior, ok, bad).tolist(), strict=True))


def score(
    cfg: ScoringConfig,
    records: Mapping[str, MemoryRecord],
    cred: Mapping[str, float],
    now: float,
    *,
    value: bool | Collection[str] = True,
    memo: Memo | None = None,
) -> Scores:
    """Reliability of every record (the chain rule needs them all); value of every
    record, of none (`value=False`), or only of the given ids (e.g. the candidates
    of a ranking, not the ancestors loaded with them).

    `memo` (for records a store shares as immutable objects, one dict per config):
    remembers per record object whether it takes the direct path below, its clipped
    confidence and its row of value inputs (all but the time)."""
    recs = list(records.values())
    every = value is True
    wanted: Collection[str] = () if isinstance(value, bool) else set(value)
    n = len(recs)
    if n == 0:
        return Scores({}, {}, dict(cred))

    def c(source: str) -> float:
        return cred[source] if source in cred else cfg.prior(source)

    if n < SMALL_BATCH:
        vrecs = recs if every else [r for r in recs if r.id in wanted]
        return _score_small(cfg, records, recs, vrecs, c, dict(cred), now)

    # A memory that does not decay and that no source confirmed or contradicted has
    # reliability clip(confidence) x credibility(creator), exactly the float the numpy
    # pass computes for it (times 1.0, no product terms): computed directly. The
    # others go through numpy, element by element as in the whole batch.
    half_life = cfg.half_life
    inf = math.inf
    own: dict[str, float] = {}
    rest: list[MemoryRecord] = []
    recall = (memo if memo is not None else {}).get
    prior = cfg.prior
    vids: list[str] = []  # the records whose value is asked, in the records' order
    vrows: list[tuple[float, ...]] = []  # their value inputs (`_value_row`)
    for r in recs:
        hit = recall(r.id)
        if hit is not None and hit[0] is r:
            base, row = hit[1], hit[2]
        else:
            base = (
                None
                if (r.contradicted_by or r.confirmed_by or half_life(r.volatility) != inf)
                else (min(max(r.creator_confidence, 0.0), 1.0))
            )
            row = None
            if memo is not None:
                if len(memo) >= 100_000:
                    memo.clear()
                timeless = r.last_access is not None or r.created_at is not None
                row = _value_row(cfg, r, now) if timeless else None
                memo[r.id] = (r, base, row)
        if every or r.id in wanted:
            vids.append(r.id)
            vrows.append(row if row is not None else _value_row(cfg, r, now))
        if base is None:
            own[r.id] = 0.0  # placeholder: keeps the records' order
            rest.append(r)
        else:
            source = r.creator_id  # `c`, written out: this loop runs per loaded record
            x = 1.0 - (1.0 - base * (cred[source] if source in cred else prior(source)))
            own[r.id] = x if 0.0 <= x <= 1.0 else min(max(x, 0.0), 1.0)
    if rest:
        contra = [(i, c(s)) for i, r in enumerate(rest) for s in r.contradicted_by]
        confirm = [(i, c(s)) for i, r in enumerate(rest) for s in r.confirmed_by]
        rel = vectorized.reliability(
            cfg,
            np.array([r.creator_confidence for r in rest], dtype=float),
            np.array([c(r.creator_id) for r in rest]),
            np.array([now - (r.created_at if r.created_at is not None else now) for r in rest]),
            np.array([half_life(r.volatility) for r in rest]),
            np.array([i for i, _ in contra], dtype=np.int64),
            np.array([x for _, x in contra], dtype=float),
            np.array([i for i, _ in confirm], dtype=np.int64),
            np.array([x for _, x in confirm], dtype=float),
        )
        own.update(zip((r.id for r in rest), rel.tolist(), strict=True))
    if not vids:
        return Scores(_chain_min(records, own), {}, dict(cred))
    # One array of the value inputs (a row per memory) instead of six.
    cols = np.array(vrows, dtype=float)
    val = vectorized.value(
        cfg, cols[:, 0], cols[:, 1], now - cols[:, 2], cols[:, 3], cols[:, 4], cols[:, 5]
    )
    return Scores(_chain_min(records, own), dict(zip(vids, val.tolist(), strict=True)), dict(cred))


def _value_row(cfg: ScoringConfig, r: MemoryRecord, now: float) -> tuple[float, ...]:
    """A record's value inputs: uses ok and failed, last access (else its creation,
    else `now`), access count, derivations, its type's cost."""
    last = r.last_access if r.last_access is not None else r.created_at
    return (
        r.uses_ok,
        r.uses_failed,
        last if last is not None else now,
        r.access_count,
        len(r.derivations),
        cfg.cost(r.type),
    )


def _score_small(cfg, records, recs, vrecs, c, cred, now: float) -> Scores:
    half_life = cfg.half_life
    inf = math.inf
    own: dict[str, float] = {}
    for r in recs:
        if r.contradicted_by or r.confirmed_by or half_life(r.volatility) != inf:
            own[r.id] = formulas.reliability(
                cfg,
                confidence=r.creator_confidence,
                creator_cred=c(r.creator_id),
                age=now - (r.created_at if r.created_at is not None else now),
                volatility=r.volatility,
                contradicting=[c(x) for x in r.contradicted_by],
                confirming=[c(x) for x in r.confirmed_by],
            )
        else:  # formulas.reliability with decay 1.0 and no product terms, written out
            x = min(max(r.creator_confidence, 0.0), 1.0) * c(r.creator_id)
            own[r.id] = min(max(1.0 - (1.0 - x), 0.0), 1.0)
    value = {
        r.id: formulas.value(
            cfg,
            uses_ok=r.uses_ok,
            uses_failed=r.uses_failed,
            idle=now
            - (
                r.last_access
                if r.last_access is not None
                else (r.created_at if r.created_at is not None else now)
            ),
            access_count=r.access_count,
            derivations=len(r.derivations),
            memory_type=r.type,
        )
        for r in vrecs
    }
    return Scores(_chain_min(records, own), value, cred)


def _chain_min(records: Mapping[str, MemoryRecord], own: dict[str, float]) -> dict[str, float]:
    """reliability(m) = min(own(m), reliability(d) for loaded dependencies d).

    Memoised recursion over the loaded part of the DAG: each memory is settled
    once; depth is bounded by the lineage depth the records were loaded with."""
    for rec in records.values():  # does any loaded memory rest on another loaded one?
        if rec.dependencies and not own.keys().isdisjoint(rec.dependencies):
            break
    else:
        return own  # nothing to cap
    out: dict[str, float] = {}

    def settle(rid: str) -> float:
        hit = out.get(rid)
        if hit is not None:
            return hit
        value = own[rid]
        out[rid] = value  # provisional: a (malformed) cycle ends here instead of looping
        for d in records[rid].dependencies:
            d = d if type(d) is str else d.id  # type: ignore[union-attr]  # not a str: a MemoryRef
            if d in own:
                low = out.get(d)
                if low is None:
                    low = settle(d)
                if low < value:
                    value = low
        out[rid] = value
        return value

    # Deepest first: a view loads the asked records, then their parents, level by level,
    # so a memory's loaded dependencies are mostly settled when it is.
    for rid in reversed(list(records)):
        if records[rid].dependencies and rid in own:
            settle(rid)
    if not out:
        return own
    settled = own.copy()  # same keys, same order: only the settled values change
    settled.update(out)
    return settled


# -- from store columns ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ColumnScores:
    ids: list[str]
    reliability: np.ndarray | None
    """Own reliability (decay, contradiction, consensus), without the chain rule; None
    when not asked for."""
    value: np.ndarray


def column_sources(cols: ScoreColumns) -> list[str]:
    """The sources whose credibility the columns' reliability needs (creators,
    confirmers, contradictors), each once: cost follows the batch, not the name table."""
    names = cols.sources
    return [names[i] for i in _used_sources(cols).tolist()]


def _used_sources(cols: ScoreColumns) -> np.ndarray:
    """Sorted distinct source indexes: a mask over the name table when it is not much
    larger than the batch (no sort), else ``np.unique``."""
    if len(cols.sources) <= 4 * (len(cols.ids) + 64):
        used = np.zeros(len(cols.sources), dtype=bool)
        used[cols.creator] = True
        used[cols.confirm_source] = True
        used[cols.contradict_source] = True
        return np.flatnonzero(used)
    return np.unique(np.concatenate((cols.creator, cols.confirm_source, cols.contradict_source)))


def score_columns(
    cfg: ScoringConfig,
    cols: ScoreColumns,
    cred: Mapping[str, float],
    now: float,
    *,
    reliability: bool = True,
) -> ColumnScores:
    """Reliability (own: the chain rule needs the graph, see `score`) and value of the
    memories of `cols` (a store's ``score_columns``), in ``cols.ids`` order, with
    `vectorized` on the columns: no per-memory Python.  `cred`: credibility per
    source (missing sources get their prior); unused when ``reliability=False``."""
    created = cols.created_at
    no_created = np.isnan(created)
    with np.errstate(invalid="ignore"):
        last = np.where(np.isnan(cols.last_access), created, cols.last_access)
        idle = np.where(np.isnan(last), 0.0, now - last)
    cost = (
        np.array([cfg.cost(t) for t in cols.types], dtype=float)[cols.type]
        if cols.types
        else np.zeros(len(cols.ids))
    )
    val = vectorized.value(
        cfg, cols.uses_ok, cols.uses_failed, idle, cols.access_count, cols.derivations, cost
    )
    rel = None
    if reliability:
        age = np.where(no_created, 0.0, now - created)
        half = (
            np.array([cfg.half_life(v) for v in cols.volatilities], dtype=float)[cols.volatility]
            if cols.volatilities
            else np.zeros(len(cols.ids))
        )
        used = _used_sources(cols)
        names = cols.sources
        src = np.zeros(len(names))  # credibility per interned source (only used ones set)
        src[used] = [
            cred[s] if s in cred else cfg.prior(s) for s in (names[i] for i in used.tolist())
        ]
        rel = vectorized.reliability(
            cfg,
            cols.confidence,
            src[cols.creator],
            age,
            half,
            cols.contradict_row,
            src[cols.contradict_source],
            cols.confirm_row,
            src[cols.confirm_source],
        )
    return ColumnScores(cols.ids, rel, val)
