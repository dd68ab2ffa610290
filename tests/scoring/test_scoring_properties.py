"""Properties of the reliability / credibility / value scores, and agreement of
the numpy batch path with the per-memory reference formulas."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.scoring import formulas, vectorized
from memlineage.scoring.config import ScoringConfig

CFG = ScoringConfig()
unit = st.floats(0.0, 1.0)
cred = st.floats(0.01, 0.99)
ages = st.floats(-100.0, 400 * 86400.0)
counts = st.integers(0, 10_000)
VOLS = ["high", "medium", "low", "static", None]

memories = st.fixed_dictionaries(
    {
        "confidence": unit,
        "creator_cred": cred,
        "age": ages,
        "volatility": st.sampled_from(VOLS),
        "contradicting": st.lists(cred, max_size=4),
        "confirming": st.lists(cred, max_size=4),
    }
)


@settings(max_examples=300, deadline=None)
@given(memories)
def test_reliability_in_unit_interval(m) -> None:
    assert 0.0 <= formulas.reliability(CFG, **m) <= 1.0


@settings(max_examples=300, deadline=None)
@given(memories, st.floats(0.0, 30 * 86400.0))
def test_decay_is_monotonic_in_time(m, later) -> None:
    older = dict(m, age=max(m["age"], 0.0) + later)
    assert formulas.reliability(CFG, **older) <= formulas.reliability(CFG, **m) + 1e-12


@settings(max_examples=300, deadline=None)
@given(memories, cred)
def test_consensus_never_lowers(m, extra) -> None:
    more = dict(m, confirming=[*m["confirming"], extra])
    assert formulas.reliability(CFG, **more) >= formulas.reliability(CFG, **m) - 1e-12


@settings(max_examples=300, deadline=None)
@given(memories, cred)
def test_contradiction_lowers_smoothly_never_a_cliff(m, other) -> None:
    before = formulas.reliability(CFG, **dict(m, confirming=[]))
    after = formulas.reliability(
        CFG, **dict(m, confirming=[], contradicting=[*m["contradicting"], other])
    )
    assert after <= before + 1e-12
    assert after >= before * (1 - CFG.contradiction_weight) - 1e-12


def test_one_wrong_claim_does_not_erase_a_long_record() -> None:
    good = formulas.credibility(CFG, "tool:flight_api", ok=200, bad=0)
    assert good - formulas.credibility(CFG, "tool:flight_api", ok=200, bad=1) < 0.01
    fresh = formulas.credibility(CFG, "tool:new_api", ok=0, bad=0)
    assert fresh == CFG.prior("tool:new_api") == 0.8
    assert formulas.credibility(CFG, "tool:new_api", ok=0, bad=1) < fresh


def test_half_life_of_a_volatile_reading_and_a_goal_that_keeps() -> None:
    half = CFG.half_lives["high"]
    now = formulas.reliability(CFG, confidence=1, creator_cred=0.8, age=0, volatility="high")
    later = formulas.reliability(CFG, confidence=1, creator_cred=0.8, age=half, volatility="high")
    assert later <= now / 2 + 1e-12
    goal = formulas.reliability(
        CFG, confidence=1, creator_cred=0.8, age=365 * 86400, volatility="low"
    )
    assert goal == now


value_inputs = st.fixed_dictionaries(
    {
        "uses_ok": counts,
        "uses_failed": counts,
        "idle": ages,
        "access_count": counts,
        "derivations": counts,
        "memory_type": st.sampled_from(["fact", "preference"]),
    }
)


@settings(max_examples=300, deadline=None)
@given(value_inputs)
def test_value_in_unit_interval(v) -> None:
    assert 0.0 <= formulas.value(CFG, **v) <= 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(memories, min_size=1, max_size=40), st.lists(value_inputs, min_size=1, max_size=40))
def test_vectorized_matches_the_reference_within_1e_9(ms, vs) -> None:
    contra_idx = [i for i, m in enumerate(ms) for _ in m["contradicting"]]
    confirm_idx = [i for i, m in enumerate(ms) for _ in m["confirming"]]
    got = vectorized.reliability(
        CFG,
        np.array([m["confidence"] for m in ms]),
        np.array([m["creator_cred"] for m in ms]),
        np.array([m["age"] for m in ms]),
        np.array([CFG.half_life(m["volatility"]) for m in ms]),
        np.array(contra_idx, dtype=np.int64),
        np.array([c for m in ms for c in m["contradicting"]]),
        np.array(confirm_idx, dtype=np.int64),
        np.array([c for m in ms for c in m["confirming"]]),
    )
    want = [formulas.reliability(CFG, **m) for m in ms]
    assert np.allclose(got, want, rtol=0, atol=1e-9)

    got_v = vectorized.value(
        CFG,
        *(
            np.array([float(v[k]) for v in vs])
            for k in ("uses_ok", "uses_failed", "idle", "access_count", "derivations")
        ),
        np.array([CFG.cost(v["memory_type"]) for v in vs]),
    )
    want_v = [formulas.value(CFG, **v) for v in vs]
    assert np.allclose(got_v, want_v, rtol=0, atol=1e-9)
    assert not any(math.isnan(x) for x in got_v)


def test_small_and_large_batches_score_alike() -> None:
    """Single decisions use the reference formulas, batches numpy: same numbers."""
    from memlineage.lineage.model import MemoryRecord
    from memlineage.scoring import batch

    recs = {
        f"m{i}": MemoryRecord(
            id=f"m{i}",
            namespace="n",
            creator_kind="agent",
            creator_id=f"agent:{i % 3}",
            creator_confidence=0.3 + (i % 7) / 10,
            created_at=1000.0 - i * 300,
            volatility=["high", "medium", None][i % 3],
            access_count=i % 5,
            uses_ok=i % 4,
            dependencies=(f"m{i - 1}",) if i % 2 else (),
            derivations=(f"m{i + 1}",) if i % 2 == 0 else (),
            confirmed_by=("agent:9",) if i % 5 == 0 else (),
            contradicted_by=("agent:8",) if i % 6 == 0 else (),
        )
        for i in range(60)
    }
    cred = {f"agent:{k}": 0.3 + k / 20 for k in range(10)}
    big = batch.score(CFG, recs, cred, 5000.0)
    for start in range(0, 60, 10):
        part = {k: recs[k] for k in list(recs)[start : start + 10]}
        small = batch.score(CFG, part, cred, 5000.0)
        for k in part:
            assert abs(small.value[k] - big.value[k]) < 1e-9
    solo = batch.score(CFG, {"m0": recs["m0"]}, cred, 5000.0)
    assert abs(solo.reliability["m0"] - big.reliability["m0"]) < 1e-9


@st.composite
def _loaded_dags(draw: st.DrawFn) -> tuple[dict[str, object], dict[str, float]]:
    """Records as a request loads them (any order; some dependencies not loaded) and
    their own reliabilities."""
    from memlineage.lineage.model import MemoryRecord

    n = draw(st.integers(1, 40))
    ids = [f"m{i}" for i in range(n)]
    records = {}
    for i, rid in enumerate(ids):
        earlier = st.sampled_from([*ids[:i], "unloaded:a", "unloaded:b"])
        deps = tuple(dict.fromkeys(draw(st.lists(earlier, max_size=3)))) if i else ()
        records[rid] = MemoryRecord(
            id=rid, namespace="n", creator_kind="agent", creator_id="agent:x", dependencies=deps
        )
    order = draw(st.permutations(ids))
    own = {rid: draw(unit) for rid in order}
    return {rid: records[rid] for rid in order}, own


@settings(max_examples=300, deadline=None)
@given(_loaded_dags())
def test_the_chain_rule_caps_each_memory_by_its_least_reliable_loaded_ancestor(
    loaded: tuple[dict[str, object], dict[str, float]],
) -> None:
    """`_chain_min` (first level written out, deeper levels recursive) gives every
    loaded memory the least of its own reliability and those of everything it rests
    on among the loaded records, whatever order they were loaded in."""
    from memlineage.scoring.batch import _chain_min

    records, own = loaded

    def lowest(rid: str) -> float:
        deps = [d for d in records[rid].dependencies if d in own]  # type: ignore[attr-defined]
        return min([own[rid], *(lowest(d) for d in deps)])

    got = _chain_min(records, dict(own))  # type: ignore[arg-type]
    assert list(got) == list(own)  # the records' order kept
    assert got == {rid: lowest(rid) for rid in own}


@st.composite
def _stored_batches(draw: st.DrawFn) -> tuple[dict[str, object], list[str]]:
    """Records as a store shares them (numpy's batch size or more: the memo's path),
    some never accessed or without a creation time, and the ids whose value is asked."""
    from memlineage.lineage.model import MemoryRecord
    from memlineage.scoring.batch import SMALL_BATCH

    n = draw(st.integers(SMALL_BATCH, SMALL_BATCH + 30))
    times = st.one_of(st.none(), st.floats(0.0, 9000.0))
    records = {
        f"m{i}": MemoryRecord(
            id=f"m{i}",
            namespace="n",
            type=draw(st.sampled_from(["fact", "tool_result", "goal"])),
            creator_kind="agent",
            creator_id=f"agent:{draw(st.integers(0, 3))}",
            creator_confidence=draw(unit),
            created_at=draw(times),
            last_access=draw(times),
            volatility=draw(st.sampled_from(VOLS)),
            access_count=draw(st.integers(0, 50)),
            uses_ok=draw(st.integers(0, 9)),
            uses_failed=draw(st.integers(0, 9)),
            confirmed_by=("agent:9",) if draw(st.booleans()) else (),
        )
        for i in range(n)
    }
    asked = draw(st.lists(st.sampled_from(list(records)), unique=True))
    return records, asked


@settings(max_examples=150, deadline=None)
@given(_stored_batches(), st.floats(0.0, 86400.0))
def test_a_memo_kept_at_one_time_scores_any_later_time_as_none_would(
    batch_asked: tuple[dict[str, object], list[str]], later: float
) -> None:
    """`score`'s memo (per shared record object: its direct-path confidence and its
    value inputs) gives the same floats as scoring without one, also at a later time:
    a record never accessed and without a creation time idles from `now`, which no
    kept row may hold."""
    from memlineage.scoring import batch

    records, asked = batch_asked
    cred = {f"agent:{k}": 0.2 + k / 10 for k in range(10)}
    memo: batch.Memo = {}
    for now in (10_000.0, 10_000.0 + later):
        for value in (True, asked):
            kept = batch.score(CFG, records, cred, now, value=value, memo=memo)  # type: ignore[arg-type]
            plain = batch.score(CFG, records, cred, now, value=value)  # type: ignore[arg-type]
            assert kept == plain
    assert len(memo) == len(records)
