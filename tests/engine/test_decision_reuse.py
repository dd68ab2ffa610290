"""Decision reuse is exact: an engine that reuses decisions answers every request
exactly as one that decides afresh, while time passes across every threshold the
bundled policies test (prices turning 1 h old, readings 5 min, quotes 7 days,
reliability decaying below 0.3, paid calls leaving the 1 h quota window) and while
the store is written (records, revocations, feedback, access statistics)."""

from __future__ import annotations

import random

import pytest
from memlineage.engine import reuse as reuse_module
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord, Status
from memlineage.store import open_store
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES
from support.ticketed import Ticketed

NS = "default"
USER = Creator("user", "user:alice")


def _world(policies=BUNDLED_POLICIES) -> tuple[ManualClock, EmbeddedStore, Engine, Engine]:
    clock = ManualClock(T0)
    store = EmbeddedStore(clock=clock)
    holder = PolicyHolder(policies)
    fresh = Engine(store, holder, clock=clock, reuse_decisions=False, record_access=False)
    reusing = Engine(store, holder, clock=clock, record_access=False)
    return clock, store, fresh, reusing


def _record(engine: Engine, mid: str, creator: str, *, age: float = 0.0, **fields) -> None:
    kind = creator.split(":")[0]
    rec = MemoryRecord(
        id=mid,
        namespace=NS,
        creator_kind=kind,
        creator_id=creator,
        created_at=engine.clock() - age,
        **fields,
    )
    assert engine.record(rec).recorded, mid


def _load(engine: Engine) -> list[str]:
    """Memories sitting just before the thresholds the bundled policies test."""
    r = _record
    for i, age in enumerate((3500.0, 3590.0, 3599.5, 100.0, 7200.0)):
        r(
            engine,
            f"price{i}",
            "tool:flight_api",
            age=age,
            tags=("flight_price",),
            type="tool_result",
            volatility="medium",
        )
    for i, age in enumerate((290.0, 299.0, 10.0)):
        r(
            engine,
            f"cpu{i}",
            "tool:metrics",
            age=age,
            tags=("live_reading",),
            type="observation",
            volatility="high",
        )
    r(engine, "quote", "tool:hotel_api", age=7 * 86400 - 100, type="tool_result")
    for i, conf in enumerate((0.35, 0.5, 0.9)):
        r(
            engine,
            f"thought{i}",
            "reasoning:planner",
            creator_confidence=conf,
            volatility="high",
            type="reasoning",
        )
    r(engine, "plan", "agent:planner", dependencies=("thought1", "price0"), type="plan")
    r(engine, "rumour", "agent:scout", creator_confidence=0.8, volatility="high", type="fact")
    r(
        engine,
        "pref",
        "user:alice",
        type="preference",
        subject="user:alice",
        attribute="seat",
        value="aisle",
    )
    return [
        "price0",
        "price1",
        "price2",
        "price3",
        "price4",
        "cpu0",
        "cpu1",
        "cpu2",
        "quote",
        "thought0",
        "thought1",
        "thought2",
        "plan",
        "rumour",
        "pref",
    ]


def _same(fresh: Engine, reusing: Engine, op: str, ids: list[str], **kw) -> None:
    a = fresh.check(NS, op, ids, USER, **kw)
    b = reusing.check(NS, op, ids, USER, **kw)
    assert a.decision == b.decision, (op, ids, kw, a.decision, b.decision)
    assert a.decision_id != b.decision_id  # every answer is a decision of its own


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reused_decisions_equal_fresh_ones_as_time_passes_and_the_store_changes(seed: int) -> None:
    rng = random.Random(seed)
    clock, store, fresh, reusing = _world()
    ticketed = Ticketed(Engine(store, reusing.policies, clock=clock, record_access=False))
    _run_equivalence(rng, clock, store, fresh, reusing, ticketed)


@pytest.mark.parametrize("seed", [4, 5])
def test_reuse_over_redis_sees_every_other_writer(seed: int, redis_server) -> None:
    """Two sidecars on one Redis: the one deciding afresh also writes (records,
    revocations, feedback) through its own connection; the reusing ones see each
    write through the namespace's counters."""
    url = redis_server.emptied()
    clock = ManualClock(T0)
    writer = open_store(url, clock=clock)
    reader = open_store(url, clock=clock)
    holder = PolicyHolder(BUNDLED_POLICIES)
    # Deciding afresh includes reading credibility afresh (without counters to key
    # it on, the cache would keep it a second).
    fresh = Engine(
        writer,
        holder,
        clock=clock,
        reuse_decisions=False,
        record_access=False,
        credibility_ttl=0.0,
    )
    reusing = Engine(reader, holder, clock=clock, record_access=False)
    ticketed = Ticketed(Engine(reader, holder, clock=clock, record_access=False))
    try:
        _run_equivalence(random.Random(seed), clock, writer, fresh, reusing, ticketed, steps=60)
    finally:
        writer.close()
        reader.close()


def _run_equivalence(
    rng: random.Random,
    clock: ManualClock,
    store,
    fresh: Engine,
    reusing: Engine,
    ticketed: Ticketed,
    steps: int = 160,
) -> None:
    """`store`: where the writes go (`fresh`'s store)."""
    ids = _load(fresh)
    for k in range(9):  # paid calls a few minutes apart: the quota fills, then drains
        clock.advance(240.0)
        _record(fresh, f"paid{k}", "tool:flight_api", tags=("flight_price",), type="tool_result")
        ids.append(f"paid{k}")
    writes = 0
    for step in range(steps):
        clock.advance(rng.choice((0.0, 0.0004, 0.5, 1.0, 5.0, 30.0, 120.0, 400.0)))
        roll = rng.random()
        if roll < 0.04:
            _record(
                fresh, f"late{step}", "tool:flight_api", tags=("flight_price",), type="tool_result"
            )
            ids.append(f"late{step}")
            writes += 1
        elif roll < 0.06:
            victim = rng.choice(ids)
            if store.get(NS, victim).status == Status.ACTIVE:
                store.revoke(NS, victim, reason="test")
                writes += 1
        elif roll < 0.08:
            store.feedback(NS, [rng.choice(ids)], success=rng.random() < 0.5)
            writes += 1
        for mid in rng.sample(ids, min(6, len(ids))):
            budget = rng.choice((None, 0.0, 1.0))
            _same(fresh, reusing, "read", [mid], budget=budget)
            want = fresh.check(NS, "read", [mid], USER, budget=budget).decision
            assert ticketed.decide("read", [mid], budget=budget) == want, (mid, budget)
        pair = rng.sample(ids, 2)
        _same(fresh, reusing, "act", pair, action="pay")
        assert (
            ticketed.decide("act", pair, action="pay")
            == fresh.check(NS, "act", pair, USER, action="pay").decision
        )
        cands = [(mid, rng.random()) for mid in rng.sample(ids, min(8, len(ids)))]
        fa = fresh.filter_rank(NS, cands, USER)
        fb = reusing.filter_rank(NS, cands, USER)
        assert [(c.memory_id, c.decision.decision, c.rank_score, c.kept) for c in fa] == [
            (c.memory_id, c.decision.decision, c.rank_score, c.kept) for c in fb
        ]
        # A replay at an earlier time is decided afresh, never answered from reuse.
        _same(fresh, reusing, "read", [rng.choice(ids)], time=clock() - rng.uniform(0, 900))
    assert writes > 0
    assert reusing.reused > steps  # the comparison above really exercised reuse
    assert ticketed.reissued > steps // 2
    assert fresh.reused == 0


def test_a_write_is_seen_at_once() -> None:
    _clock, store, fresh, reusing = _world()
    _load(fresh)
    first = reusing.check(NS, "read", ["pref"], USER)
    assert first.decision.effect == "allow"
    assert reusing.check(NS, "read", ["pref"], USER).decision is first.decision  # reused
    store.revoke(NS, "pref", reason="user withdrew it")
    assert reusing.check(NS, "read", ["pref"], USER).decision.effect == "deny"


def test_a_threshold_crossing_is_seen_at_once() -> None:
    clock, _store, fresh, reusing = _world()
    _load(fresh)
    assert reusing.check(NS, "read", ["price0"], USER).decision.effect == "allow"
    clock.advance(99.0)  # 3599 s old: still fresh, answered by reuse
    before = reusing.reused
    assert reusing.check(NS, "read", ["price0"], USER).decision.effect == "allow"
    assert reusing.reused == before + 1
    clock.advance(1.5)  # 3600.5 s old
    assert reusing.check(NS, "read", ["price0"], USER).decision.effect == "degrade"


def test_reliability_decay_is_seen() -> None:
    """rumour (high volatility: half-life 10 min) falls below reliability 0.3."""
    clock, _store, fresh, reusing = _world()
    _load(fresh)
    effects = []
    for _ in range(40):
        effects.append(reusing.check(NS, "read", ["rumour"], USER).decision.effect)
        assert effects[-1] == fresh.check(NS, "read", ["rumour"], USER).decision.effect
        clock.advance(30.0)
    assert effects[0] == "allow" and effects[-1] == "degrade"


def test_policies_reading_access_statistics_see_each_flush(tmp_path) -> None:
    """value_score moves with access statistics, flushed apart from other writes."""
    (tmp_path / "value.mlp").write_text(
        "policy seldom_used {\n  on read\n  when memory.value_score < 0.55\n"
        '  degrade downrank(0.5) "seldom used"\n}\n'
    )
    clock, _store, fresh, reusing = _world(str(tmp_path))
    reusing.record_access = True
    _record(fresh, "m", "agent:a", type="fact")
    clock.advance(30 * 86400.0)
    seen = []
    for _ in range(30):
        a = reusing.check(NS, "read", ["m"], USER)
        b = fresh.check(NS, "read", ["m"], USER)
        assert a.decision == b.decision
        reusing.flush_access()  # the sidecar flushes every half second
        seen.append(a.decision.effect)
    assert seen[0] == "degrade" and seen[-1] == "allow"  # reads raised its value


def test_reload_starts_afresh(tmp_path) -> None:
    (tmp_path / "p.mlp").write_text(
        'policy tools_denied {\n  on read\n  when memory.creator.kind == "tool"\n'
        '  deny "no tools"\n}\n'
    )
    _clock, _store, fresh, reusing = _world(str(tmp_path))
    _record(fresh, "t", "tool:x")
    assert reusing.check(NS, "read", ["t"], USER).decision.effect == "deny"
    (tmp_path / "p.mlp").write_text(
        'policy tools_degraded {\n  on read\n  when memory.creator.kind == "tool"\n'
        '  degrade annotate("tool") "tools degraded"\n}\n'
    )
    assert reusing.policies.reload().applied
    assert reusing.check(NS, "read", ["t"], USER).decision.effect == "degrade"


def test_a_call_leaving_the_quota_window_is_seen() -> None:
    """Paid calls fill the hourly quota: a stale price is accepted with an annotation;
    once the oldest calls are an hour old the refresh is due again."""
    clock, _store, fresh, reusing = _world()
    _load(fresh)
    for k in range(10):
        _record(fresh, f"paid{k}", "tool:flight_api", tags=("flight_price",), type="tool_result")
        clock.advance(60.0)
    clock.set(T0 + 3400.0)  # _load's five prices and paid0 (at T0) leave at T0 + 1 h
    seen = []
    for _ in range(60):
        a = reusing.check(NS, "read", ["price4"], USER)
        assert a.decision == fresh.check(NS, "read", ["price4"], USER).decision
        seen.append(tuple(o.kind for o in a.decision.obligations))
        clock.advance(5.0)
    assert seen[0] != seen[-1]  # over quota first, then a refresh again
    assert reusing.reused > 40


def test_credibility_read_after_a_write_by_another_hand() -> None:
    """Feedback written straight to the store (not through this engine) moves a
    source's credibility: the next decision reads it, not a cached value."""
    _clock, store, fresh, reusing = _world()
    _record(fresh, "claim", "agent:flaky", creator_confidence=0.9, type="fact")
    before = reusing.check(NS, "read", ["claim"], USER).decision
    assert before.effect == "allow"
    assert reusing.check(NS, "read", ["claim"], USER).decision is before  # reused
    for _ in range(12):  # the agent's memories keep failing: its credibility collapses
        store.feedback(NS, ["claim"], success=False)
    after = reusing.check(NS, "read", ["claim"], USER).decision
    assert after == fresh.check(NS, "read", ["claim"], USER).decision
    assert "unreliable" in [r.policy for r in after.reasons]  # reliability now below 0.3


def test_a_ticket_is_void_after_a_write_its_horizon_or_a_reload(tmp_path) -> None:
    clock, store, fresh, reusing = _world()
    _load(fresh)
    rec, ticket = reusing.check_ticketed(NS, "read", ["price0"], USER)
    assert rec.decision.effect == "allow" and ticket is not None
    issued = reusing.reissue(ticket)
    assert issued is not None and issued[0] != rec.decision_id
    clock.advance(100.5)  # price0 turns 3600.5 s old: past the decision's horizon
    assert reusing.reissue(ticket) is None
    rec, ticket = reusing.check_ticketed(NS, "read", ["pref"], USER)
    assert reusing.reissue(ticket) is not None
    store.feedback(NS, ["quote"], success=True)  # another source's memory: no bearing
    assert reusing.reissue(ticket) is not None
    _record(fresh, "pref-note", "user:alice", type="fact")
    assert reusing.reissue(ticket) is not None  # a memory outside its lineage
    store.feedback(NS, ["pref-note"], success=False)  # pref's source: its credibility
    assert reusing.reissue(ticket) is None
    rec, ticket = reusing.check_ticketed(NS, "read", ["pref"], USER)
    assert reusing.policies.reload().applied  # same files, a new serving set
    assert reusing.reissue(ticket) is None


def test_reissue_records_each_read_and_counts_the_reuse() -> None:
    clock, store, fresh, reusing = _world()
    _load(fresh)
    reusing.record_access = True
    _rec, ticket = reusing.check_ticketed(NS, "read", ["pref"], USER)
    before = reusing.reused
    for _ in range(3):
        clock.advance(1.0)
        assert reusing.reissue(ticket) is not None
    assert reusing.reused == before + 3
    reusing.flush_access()
    got = store.get(NS, "pref")
    assert (got.access_count, got.last_access) == (4, clock())


def test_refused_and_unreusable_decisions_have_no_ticket(tmp_path) -> None:
    _clock, _store, fresh, reusing = _world()
    _load(fresh)
    # An id this namespace does not hold: another namespace recording it would turn
    # "unknown provenance" into a refusal, which its counters do not cover.
    assert reusing.check_ticketed(NS, "read", ["nope"], USER)[1] is None
    assert fresh.check_ticketed(NS, "read", ["pref"], USER)[1] is None  # reuse off
    (tmp_path / "drift.mlp").write_text(
        "policy drifting {\n  on read\n  when age(memory) * 2 > 1h\n"
        '  degrade annotate("old") "old"\n}\n'
    )
    _c, _s, _f, drifting = _world(str(tmp_path))
    _record(drifting, "m", "agent:a")
    assert drifting.check_ticketed(NS, "read", ["m"], USER)[1] is None  # not time-exact


def test_a_namespace_filling_the_table_evicts_only_its_own(monkeypatch) -> None:
    # An outside audit: the table was cleared whole when full, by whichever namespace
    # filled it, emptying every other namespace's decisions (and telling it so).
    monkeypatch.setattr(reuse_module, "TABLE_LIMIT", 8)
    clock, _store, _fresh, reusing = _world()
    for ns in ("tenant-a", "tenant-b"):
        rec = MemoryRecord(
            id="note",
            namespace=ns,
            creator_kind="user",
            creator_id="user:alice",
            created_at=clock(),
        )
        assert reusing.record(rec).recorded
    reusing.check("tenant-b", "read", ["note"], USER)
    before = reusing.reused
    reusing.check("tenant-b", "read", ["note"], USER)
    assert reusing.reused == before + 1
    for i in range(30):  # distinct requests, one decision kept each
        reusing.check("tenant-a", "read", ["note"], USER, action=f"tool-{i}")
    before = reusing.reused
    reusing.check("tenant-b", "read", ["note"], USER)
    assert reusing.reused == before + 1  # tenant-b's decision is still kept
    assert 1 <= reusing.reuse.held("tenant-a") <= 7
    assert reusing.reuse.held("tenant-b") == 1
