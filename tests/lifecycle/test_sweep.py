"""The governance sweep on a real store: tiers, transitions with reasons, refusals."""

from __future__ import annotations

from functools import partial

from memlineage.lifecycle.sweep import sweep, sweep_namespace
from memlineage.lineage.clock import ManualClock
from memlineage.scoring.config import ScoringConfig
from memlineage.store import open_store
from support.memories import T0, memory

DAY = 86400.0
CFG = ScoringConfig()
mem = partial(memory, ns="n", creator_id="agent:planner", creator_kind="agent")


def test_tiers_decide_the_next_review() -> None:
    clock = ManualClock(T0)
    store = open_store("embedded", clock=clock)
    store.record(mem("hot"))
    store.record(mem("cold"))
    clock.advance(2 * DAY)
    store.record_access("n", ["hot"])
    report = sweep_namespace(store, CFG, "n", clock(), batch=10)
    assert report.examined == 2 and report.transitions == []
    now = clock()
    assert store.due_for_review("n", now=now + CFG.hot_interval, limit=10) == ["hot"]
    assert store.due_for_review("n", now=now + CFG.cold_interval, limit=10) == ["hot", "cold"]


def test_near_a_threshold_is_reviewed_soon_and_archived_when_it_drops() -> None:
    clock = ManualClock(T0)
    store = open_store("embedded", clock=clock)
    store.record(mem("fading", type="note"))
    clock.advance(10 * DAY)  # value ~0.34: above archive_below, within the margin
    assert sweep_namespace(store, CFG, "n", clock(), 10).transitions == []
    assert store.due_for_review("n", now=clock() + CFG.near_interval, limit=10) == ["fading"]
    clock.advance(5 * DAY)
    report = sweep_namespace(store, CFG, "n", clock(), 10)
    assert [(t.memory_id, t.to_status) for t in report.transitions] == [("fading", "archived")]
    last = store.get("n", "fading").status_history[-1]
    assert last.to_status == "archived" and last.reason.startswith("sweep: value 0.2")


def test_eviction_refused_for_the_current_value_of_a_claim() -> None:
    clock = ManualClock(T0)
    store = open_store("embedded", clock=clock)
    store.record(mem("addr", subject="user:1", attribute="address", value="Main St"))
    clock.advance(30 * DAY)
    assert [t.to_status for t in sweep(store, CFG, clock()).transitions] == ["archived"]
    clock.advance(31 * DAY)
    report = sweep(store, CFG, clock())
    assert [(t.memory_id, t.reason) for t in report.refused] == [
        ("addr", "not evicted: is the current value of user:1/address")
    ]
    assert store.get("n", "addr").status == "archived"


def test_evicted_memories_leave_the_schedule_and_only_due_ones_are_examined() -> None:
    clock = ManualClock(T0)
    store = open_store("embedded", clock=clock)
    store.record(mem("gone", type="note"))
    clock.advance(30 * DAY)
    for i in range(50):
        store.record(mem(f"fresh-{i}"))  # due an hour from now: not examined
    assert sweep(store, CFG, clock()).examined == 1
    clock.advance(31 * DAY)
    report = sweep(store, CFG, clock(), namespace="n", batch=1)
    assert [(t.memory_id, t.to_status) for t in report.transitions] == [("gone", "evicted")]
    assert "gone" not in store.due_for_review("n", now=clock() + 365 * DAY, limit=1000)
