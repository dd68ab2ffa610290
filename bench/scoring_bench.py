"""Scoring and sweep benchmark: prints figures, asserts nothing about time (not a test).

1. Scoring: 100,000 generated memories (tool:/user:/agent:/reasoning: creators,
   volatility high/medium/low/none, ages up to 60 days, confirmations and
   contradictions by 1-3 other sources, accesses, feedback, derivations and
   dependencies) scored by
   - the vectorised path, ``scoring.batch.score`` end to end (numpy arrays built
     from the MemoryRecords, reliability + value, chain rule), and
   - a per-memory Python loop over ``formulas.reliability`` / ``formulas.value``
     followed by the same chain-rule step (``batch._chain_min``);
   then the math alone: ``vectorized.reliability`` / ``vectorized.value`` on
   prebuilt arrays vs the formulas called on prebuilt per-memory values (no chain).
   Every memory must agree within 1e-9 before anything is timed (exit 1 if not).
   Then store -> scores: the same memories in an EmbeddedStore (``_bulk_load``);
   ``store.score_columns`` + ``batch.score_columns`` vs ``store.get_many`` +
   ``formulas`` per record (own reliability and value, no chain rule).
2. Sweep: an in-memory ``EmbeddedStore`` holding 1,000,000 memories in one
   namespace and 10,000 in another (``_bulk_load``, next reviews spread over the
   next 30 days, so none is due); before each pass ``batch`` of them (the same
   ids in both namespaces) are made due, then one ``sweep_namespace`` pass of
   that batch is timed.  95% were used recently (they stay active: review +
   reschedule), every 20th is stale (archived on its first review).  The
   big/small time ratio for the same batch should be ~1: the cost follows the
   batch examined, not the store size.

    .venv/bin/python bench/scoring_bench.py                      # ~30 s, ~820 MB RAM
    .venv/bin/python bench/scoring_bench.py --memories 20000 --store-size 100000
    .venv/bin/python bench/scoring_bench.py --no-sweep
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from memlineage.lifecycle.sweep import sweep_namespace
from memlineage.lineage.model import MemoryRecord
from memlineage.scoring import batch, formulas, vectorized
from memlineage.scoring.config import DAY, ScoringConfig
from memlineage.store.embedded import EmbeddedStore

NOW = 1_700_000_000.0
TOLERANCE = 1e-9
KINDS = ("tool", "user", "agent", "reasoning")
SOURCES = {
    "tool": (
        "tool:flight_api",
        "tool:weather",
        "tool:search",
        "tool:calendar",
        "tool:crm",
        "tool:sql",
        "tool:pricing",
        "tool:geo",
    ),
    "user": tuple(f"user:u{i}" for i in range(8)),
    "agent": (
        "agent:planner",
        "agent:booker",
        "agent:support",
        "agent:researcher",
        "agent:critic",
        "agent:summarizer",
    ),
    "reasoning": ("reasoning:cot", "reasoning:plan", "reasoning:reflect", "reasoning:infer"),
}
ALL_SOURCES = tuple(s for k in KINDS for s in SOURCES[k])
TYPES = ("fact", "tool_result", "preference", "plan", "observation", "summary")
VOLATILITIES = ("high", "medium", "low", None)


# -- generated memories ---------------------------------------------------------------------


def _fields(rng: random.Random, *, stale: bool = False, recent: bool = False) -> dict[str, Any]:
    """Realistic fields of one memory (no id, namespace, dependencies or derivations).

    ``recent``: used in the last two days (the sweep's memories that stay active);
    ``stale``: created 40-60 days ago, never used (archived on review)."""
    kind = rng.choices(KINDS, weights=(35, 25, 25, 15))[0]
    creator = rng.choice(SOURCES[kind])
    age = rng.uniform(40 * DAY, 60 * DAY) if stale else rng.uniform(60.0, 60 * DAY)
    created = NOW - age
    others = [s for s in ALL_SOURCES if s != creator]
    confirmed = tuple(sorted(rng.sample(others, rng.randint(1, 3)))) if rng.random() < 0.25 else ()
    contradicted = (
        tuple(sorted(rng.sample([s for s in others if s not in confirmed], rng.randint(1, 3))))
        if rng.random() < 0.15
        else ()
    )
    if stale:
        last, accesses, ok, failed = None, 0, 0, 0
    else:
        p = rng.random()
        if recent:
            last = NOW - rng.uniform(0.0, min(age, 2 * DAY))
        elif p < 0.15:
            last = None  # never read since recorded
        elif p < 0.45:
            last = NOW - rng.uniform(0.0, min(age, DAY))  # hot
        else:
            last = created + rng.uniform(0.0, age)
        accesses = 0 if last is None else 1 + int(rng.expovariate(1 / 12))
        ok = int(rng.expovariate(1 / 3)) if rng.random() < 0.4 else 0
        failed = int(rng.expovariate(1 / 1.5)) if rng.random() < 0.2 else 0
    return dict(
        type=rng.choice(TYPES),
        creator_kind=kind,
        creator_id=creator,
        creator_confidence=round(rng.uniform(0.3, 1.0), 3),
        volatility=rng.choices(VOLATILITIES, weights=(15, 35, 30, 20))[0],
        created_at=created,
        last_access=last,
        access_count=accesses,
        confirmed_by=confirmed,
        contradicted_by=contradicted,
        uses_ok=ok,
        uses_failed=failed,
    )


def scoring_records(n: int, rng: random.Random) -> dict[str, MemoryRecord]:
    """n memories; ~20% derived from 1-2 earlier ones (derivations filled in to match)."""
    ids = [f"m:{i:07d}" for i in range(n)]
    fields = [_fields(rng) for _ in range(n)]
    deps: list[tuple[str, ...]] = [()] * n
    kids: list[list[str]] = [[] for _ in range(n)]
    for i in range(1, n):
        if rng.random() < 0.2:
            parents = sorted({rng.randrange(max(0, i - 5000), i) for _ in range(rng.randint(1, 2))})
            deps[i] = tuple(ids[p] for p in parents)
            for p in parents:
                kids[p].append(ids[i])
    return {
        ids[i]: MemoryRecord(
            id=ids[i],
            namespace="bench:score",
            dependencies=deps[i],
            derivations=tuple(kids[i]),
            **fields[i],
        )
        for i in range(n)
    }


def source_credibilities(cfg: ScoringConfig, rng: random.Random) -> dict[str, float]:
    stats = {s: (float(rng.randint(0, 200)), float(rng.randint(0, 40))) for s in ALL_SOURCES}
    return batch.credibilities(cfg, stats)


# -- the two scoring paths ------------------------------------------------------------------


def loop_score(
    cfg: ScoringConfig, records: Mapping[str, MemoryRecord], cred: Mapping[str, float], now: float
) -> tuple[dict[str, float], dict[str, float]]:
    """batch.score written as a per-memory loop over `formulas`, same chain-rule step."""

    def c(source: str) -> float:
        return cred.get(source, cfg.prior(source))

    own: dict[str, float] = {}
    val: dict[str, float] = {}
    for rid, r in records.items():
        created = r.created_at if r.created_at is not None else now
        cm = c(r.creator_id)
        own[rid] = formulas.reliability(
            cfg,
            confidence=r.creator_confidence,
            creator_cred=cm,
            age=now - created,
            volatility=r.volatility,
            contradicting=[c(s) for s in r.contradicted_by],
            confirming=[c(s) for s in r.confirmed_by],
        )
        last = r.last_access if r.last_access is not None else created
        val[rid] = formulas.value(
            cfg,
            uses_ok=r.uses_ok,
            uses_failed=r.uses_failed,
            idle=now - last,
            access_count=r.access_count,
            derivations=len(r.derivations),
            memory_type=r.type,
        )
    return batch._chain_min(records, own), val


class Inputs:
    """Prebuilt inputs for the math-only comparison: numpy arrays and per-memory values."""

    def __init__(
        self,
        cfg: ScoringConfig,
        records: Mapping[str, MemoryRecord],
        cred: Mapping[str, float],
        now: float,
    ):
        recs = list(records.values())
        creator = [cred[r.creator_id] for r in recs]
        contra = [[cred[s] for s in r.contradicted_by] for r in recs]
        confirm = [[cred[s] for s in r.confirmed_by] for r in recs]
        age = [now - r.created_at for r in recs]
        idle = [now - (r.last_access if r.last_access is not None else r.created_at) for r in recs]
        self.rel_rows = [
            dict(
                confidence=r.creator_confidence,
                creator_cred=creator[i],
                age=age[i],
                volatility=r.volatility,
                contradicting=contra[i],
                confirming=confirm[i],
            )
            for i, r in enumerate(recs)
        ]
        self.val_rows = [
            dict(
                uses_ok=r.uses_ok,
                uses_failed=r.uses_failed,
                idle=idle[i],
                access_count=r.access_count,
                derivations=len(r.derivations),
                memory_type=r.type,
            )
            for i, r in enumerate(recs)
        ]

        def ragged(lists: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
            idx = [i for i, xs in enumerate(lists) for _ in xs]
            return np.array(idx, dtype=np.int64), np.array([x for xs in lists for x in xs])

        self.rel_args = (
            np.array([r.creator_confidence for r in recs], dtype=float),
            np.array(creator),
            np.array(age),
            np.array([cfg.half_life(r.volatility) for r in recs]),
            *ragged(contra),
            *ragged(confirm),
        )
        self.val_args = tuple(
            np.array(x, dtype=float)
            for x in (
                [r.uses_ok for r in recs],
                [r.uses_failed for r in recs],
                idle,
                [r.access_count for r in recs],
                [len(r.derivations) for r in recs],
                [cfg.cost(r.type) for r in recs],
            )
        )


def math_vectorised(cfg: ScoringConfig, inp: Inputs) -> tuple[np.ndarray, np.ndarray]:
    return (vectorized.reliability(cfg, *inp.rel_args), vectorized.value(cfg, *inp.val_args))


def math_loop(cfg: ScoringConfig, inp: Inputs) -> tuple[list[float], list[float]]:
    rel = [formulas.reliability(cfg, **row) for row in inp.rel_rows]
    val = [formulas.value(cfg, **row) for row in inp.val_rows]
    return rel, val


# -- timing helpers -------------------------------------------------------------------------


def timed(fn: Callable[[], object], rounds: int) -> float:
    """Median seconds of `rounds` calls (a collection first, so none lands mid-call)."""
    times = []
    for _ in range(rounds):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def max_diff(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    if a.keys() != b.keys():
        return math.inf
    return max((abs(a[k] - b[k]) for k in a), default=0.0)


def fmt_rate(n: int, seconds: float) -> str:
    rate = n / seconds
    return f"{rate / 1e6:8.2f} M/s" if rate >= 1e6 else f"{rate / 1e3:8.1f} k/s"


# -- 1. scoring -----------------------------------------------------------------------------


def bench_scoring(cfg: ScoringConfig, n: int, rounds: int, seed: int) -> bool:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    records = scoring_records(n, rng)
    cred = source_credibilities(cfg, rng)
    inp = Inputs(cfg, records, cred, NOW)
    gc.freeze()  # the generated records are long-lived: keep full collections off them
    recs = list(records.values())
    print(f"== 1. scoring {n:,} memories (generated in {time.perf_counter() - t0:.1f} s)")
    print(
        "   creators: "
        + ", ".join(f"{k}: {sum(r.creator_kind == k for r in recs) / n:.0%}" for k in KINDS)
        + "; volatility: "
        + ", ".join(
            f"{v or 'none'}: {sum(r.volatility == v for r in recs) / n:.0%}" for v in VOLATILITIES
        )
    )
    print(
        f"   confirmed: {sum(bool(r.confirmed_by) for r in recs) / n:.0%}, "
        f"contradicted: {sum(bool(r.contradicted_by) for r in recs) / n:.0%}, "
        f"derived (chain rule applies): {sum(bool(r.dependencies) for r in recs) / n:.0%}, "
        f"with feedback: {sum(r.uses_ok + r.uses_failed > 0 for r in recs) / n:.0%}"
    )

    # Agreement on every memory before any timing.
    vec = batch.score(cfg, records, cred, NOW)
    loop_rel, loop_val = loop_score(cfg, records, cred, NOW)
    m_rel, m_val = math_vectorised(cfg, inp)
    l_rel, l_val = math_loop(cfg, inp)
    ids = list(records)
    checks = {
        "end to end: reliability (chain applied)": max_diff(vec.reliability, loop_rel),
        "end to end: value": max_diff(vec.value, loop_val),
        "math only: reliability (own)": float(np.max(np.abs(m_rel - np.array(l_rel)))),
        "math only: value": float(np.max(np.abs(m_val - np.array(l_val)))),
        "math only vs end to end: value": max_diff(
            dict(zip(ids, m_val.tolist(), strict=True)), vec.value
        ),
    }
    capped = sum(vec.reliability[k] < m_rel[i] for i, k in enumerate(ids))
    ok = all(d <= TOLERANCE for d in checks.values())
    print(
        f"   agreement, max |vectorised - loop| over all {n:,} memories (tolerance {TOLERANCE:g}):"
    )
    for name, d in checks.items():
        print(f"     {name:<40} {d:.2e}  {'ok' if d <= TOLERANCE else 'MISMATCH'}")
    print(f"   chain rule lowered the reliability of {capped:,} derived memories")
    if not ok:
        print("   vectorised and loop scores disagree: not timing", file=sys.stderr)
        return False

    t_vec = timed(lambda: batch.score(cfg, records, cred, NOW), rounds)
    t_loop = timed(lambda: loop_score(cfg, records, cred, NOW), rounds)
    own = dict(zip(ids, m_rel.tolist(), strict=True))
    t_chain = timed(lambda: batch._chain_min(records, own), rounds)
    t_mvec = timed(lambda: math_vectorised(cfg, inp), max(rounds, 5))
    t_mloop = timed(lambda: math_loop(cfg, inp), rounds)
    lookups = [s for r in recs for s in (r.creator_id, *r.confirmed_by, *r.contradicted_by)]
    t_prior = timed(lambda: [cfg.prior(s) for s in lookups], rounds)
    t_rest = t_vec - t_chain - t_mvec
    print(
        f"   median of {rounds} runs. batch.score = {t_vec * 1e3:.0f} ms: numpy math "
        f"{t_mvec * 1e3:.1f} ms, chain rule (batch._chain_min, also in the loop path) "
        f"{t_chain * 1e3:.0f} ms, building arrays from the records + result dicts "
        f"{t_rest * 1e3:.0f} ms"
    )
    print(
        f"   (of which {t_prior * 1e3:.0f} ms: cfg.prior(source) evaluated {len(lookups):,} "
        "times as the eager default of cred.get(source, cfg.prior(source)), although every "
        "source is in cred; the loop path pays it too)"
    )
    print()
    print(
        f"   {'comparison':<42} {'loop':>10} {'vectorised':>11} {'loop rate':>12} "
        f"{'vec rate':>12} {'loop/vec':>9}"
    )
    rows = [
        ("end to end: records -> scores, chain rule", t_loop, t_vec),
        ("end to end, chain-rule time subtracted", t_loop - t_chain, t_vec - t_chain),
        ("math only: prebuilt inputs, no chain", t_mloop, t_mvec),
    ]
    for name, tl, tv in rows:
        print(
            f"   {name:<42} {tl * 1e3:8.1f}ms {tv * 1e3:9.2f}ms {fmt_rate(n, tl):>12} "
            f"{fmt_rate(n, tv):>12} {tl / tv:8.1f}x"
        )
    for name, tl, tv in (rows[0], rows[2]):
        verdict = "met" if tl / tv >= 20 else "NOT met"
        print(f"   target >= 20x, {name.split(':')[0]}: {verdict} ({tl / tv:.1f}x)")
    print()
    return bench_store_scoring(cfg, records, cred, rounds)


STORE_NS = "bench:score"


def store_vectorised(
    cfg: ScoringConfig, store: EmbeddedStore, chunks: list[list[str]], cred: Mapping[str, float]
) -> list[batch.ColumnScores]:
    """store.score_columns (np.take on the store's columns) + batch.score_columns."""
    return [
        batch.score_columns(cfg, store.score_columns(STORE_NS, ids), cred, NOW) for ids in chunks
    ]


def store_loop(
    cfg: ScoringConfig, store: EmbeddedStore, chunks: list[list[str]], cred: Mapping[str, float]
) -> tuple[list[float], list[float]]:
    """store.get_many + formulas.reliability / formulas.value per record."""
    rel: list[float] = []
    val: list[float] = []
    prior = cfg.prior
    for ids in chunks:
        for r in store.get_many(STORE_NS, ids).values():
            created = r.created_at if r.created_at is not None else NOW
            cm = cred[r.creator_id] if r.creator_id in cred else prior(r.creator_id)
            rel.append(
                formulas.reliability(
                    cfg,
                    confidence=r.creator_confidence,
                    creator_cred=cm,
                    age=NOW - created,
                    volatility=r.volatility,
                    contradicting=[cred[s] if s in cred else prior(s) for s in r.contradicted_by],
                    confirming=[cred[s] if s in cred else prior(s) for s in r.confirmed_by],
                )
            )
            last = r.last_access if r.last_access is not None else created
            val.append(
                formulas.value(
                    cfg,
                    uses_ok=r.uses_ok,
                    uses_failed=r.uses_failed,
                    idle=NOW - last,
                    access_count=r.access_count,
                    derivations=len(r.derivations),
                    memory_type=r.type,
                )
            )
    return rel, val


def bench_store_scoring(
    cfg: ScoringConfig, records: Mapping[str, MemoryRecord], cred: Mapping[str, float], rounds: int
) -> bool:
    """The same memories in an EmbeddedStore (its score columns kept by the store):
    store -> scores (own reliability + value, no chain rule), both paths reading the
    store, in chunks of 10,000 ids (the store's batch limit)."""
    n = len(records)
    store = EmbeddedStore()
    t0 = time.perf_counter()
    store._bulk_load(STORE_NS, records.values(), review_at=NOW)
    t_load = time.perf_counter() - t0
    gc.freeze()  # the loaded store is long-lived too: `timed`'s collections skip it
    ids = list(records)
    chunks = [ids[i : i + 10_000] for i in range(0, n, 10_000)]
    print(
        f"   store -> scores: the same {n:,} memories in an EmbeddedStore "
        f"(_bulk_load {t_load:.1f} s, score columns kept by the store), "
        f"{len(chunks)} calls of <= 10,000 ids per path"
    )
    vec = store_vectorised(cfg, store, chunks, cred)
    v_ids = [i for c in vec for i in c.ids]
    v_rel = np.concatenate([c.reliability for c in vec if c.reliability is not None])
    v_val = np.concatenate([c.value for c in vec])
    l_rel, l_val = store_loop(cfg, store, chunks, cred)
    derivations = sum(len(r.derivations) for r in records.values())
    stored = int(sum(store.score_columns(STORE_NS, c).derivations.sum() for c in chunks))
    checks = {
        "store: reliability (own)": float(np.max(np.abs(v_rel - np.array(l_rel)))),
        "store: value": float(np.max(np.abs(v_val - np.array(l_val)))),
    }
    ok = (
        v_ids == ids
        and len(l_rel) == n
        and stored == derivations
        and all(d <= TOLERANCE for d in checks.values())
    )
    for name, d in checks.items():
        print(f"     {name:<40} {d:.2e}  {'ok' if d <= TOLERANCE else 'MISMATCH'}")
    print(
        f"     ids in order: {v_ids == ids}; derivations in the columns {stored:,} "
        f"(generated {derivations:,})"
    )
    if not ok:
        print("   store paths disagree: not timing", file=sys.stderr)
        return False
    t_vec = timed(lambda: store_vectorised(cfg, store, chunks, cred), max(rounds, 5))
    t_loop = timed(lambda: store_loop(cfg, store, chunks, cred), rounds)
    t_cols = timed(lambda: [store.score_columns(STORE_NS, c) for c in chunks], max(rounds, 5))
    name = "store -> scores: columns vs get_many+loop"
    print(
        f"   {name:<42} {t_loop * 1e3:8.1f}ms {t_vec * 1e3:9.2f}ms "
        f"{fmt_rate(n, t_loop):>12} {fmt_rate(n, t_vec):>12} {t_loop / t_vec:8.1f}x"
    )
    print(
        f"   (vectorised: store.score_columns {t_cols * 1e3:.1f} ms: id -> row lookups "
        f"(stored ids are not re-validated), gathers; numpy scoring "
        f"{(t_vec - t_cols) * 1e3:.1f} ms)"
    )
    verdict = "met" if t_loop / t_vec >= 20 else "NOT met"
    print(f"   target >= 20x, store -> scores: {verdict} ({t_loop / t_vec:.1f}x)")
    print()
    return True


# -- 2. sweep -------------------------------------------------------------------------------


def load(
    store: EmbeddedStore, ns: str, n: int, pool: list[dict[str, Any]], days: int = 30
) -> float:
    """Bulk-load n memories, next reviews spread over the next `days` days (none due)."""
    t0 = time.perf_counter()
    size = len(pool)
    for d in range(days):
        store._bulk_load(
            ns,
            (
                MemoryRecord(id=f"s:{i:07d}", namespace=ns, **pool[i % size])
                for i in range(d, n, days)
            ),
            review_at=NOW + d * DAY + 3600.0 + (d * 7919) % 86000,
        )
    return time.perf_counter() - t0


def bench_sweep(
    cfg: ScoringConfig, big_n: int, small_n: int, batches: list[int], rounds: int, seed: int
) -> None:
    rng = random.Random(seed + 1)
    # 2,000 distinct field sets, cycled: every 20th memory (i % 20 == 0) is stale.
    pool = [_fields(rng, stale=(j % 20 == 0), recent=True) for j in range(2000)]
    store = EmbeddedStore()
    big, small = "bench:big", "bench:small"
    gc.disable()  # building ~1M long-lived objects: no point scanning them while loading
    t_big = load(store, big, big_n, pool)
    t_small = load(store, small, small_n, pool)
    gc.enable()
    gc.collect()
    gc.freeze()  # loaded store is long-lived: keep full collections off it during passes
    print(
        f"== 2. sweep: embedded store (in memory), namespace {big!r} {big_n:,} memories "
        f"(loaded in {t_big:.1f} s), {small!r} {small_n:,} ({t_small:.1f} s)"
    )
    print(
        "   next reviews spread over the next 30 days; before each pass `batch` memories "
        "(the same ids in both namespaces) are made due now; every 20th is stale "
        "(archived on its first review), the rest were used in the last 2 days "
        "(stay active: review + reschedule)"
    )
    sizes = {big: big_n, small: small_n}
    times: dict[tuple[str, int], list[float]] = {}
    examined: dict[tuple[str, int], list[int]] = {}
    moved: dict[tuple[str, int], list[int]] = {}
    stamp = 0
    for b in batches:
        for r in range(rounds):
            order = (big, small) if r % 2 == 0 else (small, big)
            for ns in order:
                n_due = min(b, sizes[ns])
                stamp += 1  # each due set earlier than any entry left from earlier passes
                ids = [f"s:{i:07d}" for i in range(n_due)]
                for lo in range(0, n_due, 10_000):
                    store.schedule_review(
                        ns, dict.fromkeys(ids[lo : lo + 10_000], NOW - stamp), now=NOW - stamp
                    )
                if store.due_for_review(ns, now=NOW, limit=1)[0] != ids[0]:
                    raise SystemExit("unexpected review order")
                gc.collect()
                t0 = time.perf_counter()
                rep = sweep_namespace(store, cfg, ns, NOW, b)
                times.setdefault((ns, b), []).append(time.perf_counter() - t0)
                examined.setdefault((ns, b), []).append(rep.examined)
                moved.setdefault((ns, b), []).append(len(rep.transitions))
                if store.due_for_review(ns, now=NOW, limit=1):
                    raise SystemExit(f"{ns}: memories still due after the pass")
    print(
        f"   median of {rounds} passes per row (namespaces alternated); transitions: "
        "archived on the first pass / on the later passes (same ids, already archived)"
    )
    print()
    print(
        f"   {'batch':>6}  {'namespace':<12} {'stored':>10} {'examined':>9} "
        f"{'transitions':>12} {'ms/pass':>9} {'us/memory':>10} {'big/small':>10}"
    )
    for b in batches:
        med = {ns: statistics.median(times[(ns, b)]) for ns in (big, small)}
        for ns in (big, small):
            ex = examined[(ns, b)]
            mv = moved[(ns, b)]
            per = med[ns] / ex[0] * 1e6
            ratio = f"{med[big] / med[small]:9.2f}x" if ns == big else ""
            print(
                f"   {b:>6}  {ns:<12} {sizes[ns]:>10,} {ex[0]:>9,} "
                f"{f'{mv[0]} / {max(mv[1:], default=0)}':>12} {med[ns] * 1e3:>9.2f} "
                f"{per:>10.1f} {ratio:>10}"
            )
    per_mem = [statistics.median(times[(big, b)]) / examined[(big, b)][0] for b in batches]
    growth = statistics.median(times[(big, batches[-1])]) / statistics.median(
        times[(big, batches[0])]
    )
    print()
    print(
        f"   big namespace ({big_n:,} stored): time per examined memory "
        + " / ".join(f"{p * 1e6:.1f}" for p in per_mem)
        + " us at batch "
        + " / ".join(f"{b:,}" for b in batches)
        + f"; pass time grows {growth:.0f}x for a {batches[-1] // batches[0]}x larger batch"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000, help="scoring: memories")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs per figure")
    parser.add_argument(
        "--store-size", type=int, default=1_000_000, help="sweep: memories in the big namespace"
    )
    parser.add_argument(
        "--small-size", type=int, default=10_000, help="sweep: memories in the small namespace"
    )
    parser.add_argument("--batches", default="100,1000,10000", help="sweep batch sizes")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-scoring", action="store_true")
    parser.add_argument("--no-sweep", action="store_true")
    args = parser.parse_args()
    cfg = ScoringConfig()
    print(
        f"MemLineage scoring bench: Python {platform.python_version()}, numpy "
        f"{np.__version__}, {os.cpu_count()} CPUs. Figures from a shared machine (other "
        "jobs running): compare within one run, not across machines."
    )
    print()
    t0 = time.perf_counter()
    if not args.no_scoring and not bench_scoring(cfg, args.memories, args.rounds, args.seed):
        sys.exit(1)
    if not args.no_sweep:
        batches = [int(b) for b in args.batches.split(",") if b]
        bench_sweep(cfg, args.store_size, args.small_size, batches, args.rounds, args.seed)
    print()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"total wall time {time.perf_counter() - t0:.0f} s, peak RSS {rss:,.0f} MB")


if __name__ == "__main__":
    main()
