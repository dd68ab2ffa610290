"""``batch.score_columns`` (numpy over a store's score columns) agrees with the
per-memory reference formulas within 1e-9, on memories recorded through the real
embedded store (claims confirmed/contradicted by other sources, accesses, feedback,
derivations), and through the base-class path built from records."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.lineage import MemoryRecord
from memlineage.scoring import batch, formulas
from memlineage.scoring.config import ScoringConfig
from memlineage.store import EmbeddedStore, LineageStore
from support.memories import NOW

CFG = ScoringConfig(type_costs={"plan": 0.3, "tool_result": 0.05})
NS = "tenant:score"
SOURCES = ["user:a", "user:b", "tool:c", "agent:d", "reasoning:e", "other"]

memory = st.fixed_dictionaries(
    {
        "creator_id": st.sampled_from(SOURCES),
        "creator_confidence": st.floats(0.0, 1.0),
        "volatility": st.sampled_from(["high", "medium", "low", "static", None]),
        "type": st.sampled_from(["fact", "plan", "tool_result"]),
        "age": st.floats(0.0, 90 * 86400.0),
        "claim": st.sampled_from([None, "x", "y"]),
        "value": st.sampled_from(["1", "2"]),
        "parent": st.one_of(st.none(), st.integers(0, 1000)),
        "accesses": st.integers(0, 60),
        "ok": st.integers(0, 5),
        "failed": st.integers(0, 5),
    }
)


def _fill(store: EmbeddedStore, mems: list[dict]) -> list[str]:
    ids: list[str] = []
    for i, m in enumerate(sorted(mems, key=lambda m: -m["age"])):  # oldest first
        at = NOW - m["age"]
        deps = (ids[m["parent"] % len(ids)],) if ids and m["parent"] is not None else ()
        store.record(
            MemoryRecord(
                id=f"m{i}",
                namespace=NS,
                creator_id=m["creator_id"],
                creator_confidence=m["creator_confidence"],
                volatility=m["volatility"],
                type=m["type"],
                created_at=at,
                dependencies=deps,
                subject=m["claim"],
                attribute="attr" if m["claim"] else None,
                value=m["value"],
            ),
            now=at,
        )
        ids.append(f"m{i}")
    for i, m in enumerate(sorted(mems, key=lambda m: -m["age"])):
        if m["accesses"]:
            store.record_accesses(NS, {ids[i]: (m["accesses"], NOW - m["age"] / 2)})
        for _ in range(m["ok"]):
            store.feedback(NS, [ids[i]], True, now=NOW)
        for _ in range(m["failed"]):
            store.feedback(NS, [ids[i]], False, now=NOW)
    return ids


@settings(max_examples=60, deadline=None)
@given(st.lists(memory, min_size=1, max_size=40), st.floats(0.0, 86400.0))
def test_score_columns_agrees_with_formulas(mems, later) -> None:
    store = EmbeddedStore()
    ids = _fill(store, mems)
    now = NOW + later
    records = store.get_many(NS, ids)
    cred = batch.credibilities(CFG, store.source_stats(NS, batch.sources_of(records)))

    def c(s: str) -> float:
        return cred[s] if s in cred else CFG.prior(s)

    for cols in (store.score_columns(NS, ids), LineageStore.score_columns(store, NS, ids)):
        assert set(batch.column_sources(cols)) == batch.sources_of(records)
        got = batch.score_columns(CFG, cols, cred, now)
        assert got.ids == ids and got.reliability is not None
        only_value = batch.score_columns(CFG, cols, {}, now, reliability=False)
        assert only_value.reliability is None
        assert only_value.value.tolist() == got.value.tolist()
        for j, rid in enumerate(ids):
            r = records[rid]
            created = r.created_at if r.created_at is not None else now
            rel = formulas.reliability(
                CFG,
                confidence=r.creator_confidence,
                creator_cred=c(r.creator_id),
                age=now - created,
                volatility=r.volatility,
                contradicting=[c(s) for s in r.contradicted_by],
                confirming=[c(s) for s in r.confirmed_by],
            )
            val = formulas.value(
                CFG,
                uses_ok=r.uses_ok,
                uses_failed=r.uses_failed,
                idle=now - (r.last_access if r.last_access is not None else created),
                access_count=r.access_count,
                derivations=len(r.derivations),
                memory_type=r.type,
            )
            assert math.isclose(got.reliability[j], rel, rel_tol=0, abs_tol=1e-9)
            assert math.isclose(got.value[j], val, rel_tol=0, abs_tol=1e-9)


def test_no_created_at_and_no_access_is_age_and_idle_zero() -> None:
    store = EmbeddedStore()
    # record() stamps created_at, so only the bulk loader (benches, tests) can store a
    # memory without one: the branch under test.
    store._bulk_load(
        NS,
        [MemoryRecord(id="x", namespace=NS, creator_id="user:a", volatility="high")],
        review_at=NOW,
    )
    got = batch.score_columns(CFG, store.score_columns(NS, ["x"]), {}, NOW)
    assert got.reliability is not None
    assert math.isclose(
        got.reliability[0],
        formulas.reliability(
            CFG, confidence=1.0, creator_cred=CFG.prior("user:a"), age=0.0, volatility="high"
        ),
        abs_tol=1e-12,
    )
    assert math.isclose(
        got.value[0],
        formulas.value(
            CFG,
            uses_ok=0,
            uses_failed=0,
            idle=0.0,
            access_count=0,
            derivations=0,
            memory_type="fact",
        ),
        abs_tol=1e-12,
    )
