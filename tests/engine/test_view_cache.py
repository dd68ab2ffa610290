"""Kept lineage views (engine/view_cache.py): a Check answered from a kept view decides
as one that reads the store afresh, after every kind of change a view can miss — a
derivation, a revocation and its cascade, a revision onto other dependencies, a field
update, source statistics moved by a contradicting claim or by feedback, access
statistics when a policy reads them, and time passing over a decaying memory — and a
view is kept (not read again) while nothing it holds changed."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from memlineage.engine import view_cache
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import LineageView
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0, memory

REPO = Path(__file__).resolve().parents[2]
NS = "default"
ACTOR = Creator("agent", "agent:planner")
EXTRA = """
policy much_read priority 35 {
  on read
  when memory.access_count > 2
  degrade annotate("read often")
}

policy weak_use priority 34 {
  on read
  when any(x in descendants(memory) : x.confidence < 0.5)
  degrade annotate("something built on it is weak")
}
"""


class CountingStore(EmbeddedStore):
    """The embedded store, counting the lineage views it is asked for."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.views_read = 0

    def lineage_view(self, *args: Any, **kwargs: Any) -> LineageView:
        self.views_read += 1
        return super().lineage_view(*args, **kwargs)


@pytest.fixture
def world(tmp_path: Path) -> tuple[CountingStore, Engine, Engine, ManualClock]:
    policies = tmp_path / "policies"
    shutil.copytree(REPO / "policies", policies)
    (policies / "zz_extra.mlp").write_text(EXTRA)
    clock = ManualClock(T0)
    store = CountingStore(clock=clock)

    def engine(keep: bool) -> Engine:
        return Engine(
            store,
            PolicyHolder(str(policies)),
            clock=clock,
            reuse_decisions=False,
            record_access=False,
            keep_views=keep,
        )

    kept, fresh = engine(True), engine(False)
    assert kept.views is not None and fresh.views is None
    user = Creator("user", "user:alice")
    for rec in (
        memory("root", ns=NS),
        memory(
            "price",
            ns=NS,
            creator_id="tool:flight_api",
            creator_kind="tool",
            type="tool_result",
            volatility="high",
            tags=("flight_price",),
        ),
        memory("plan", "root", "price", ns=NS, creator_id="agent:planner", creator_kind="agent"),
        memory("city", ns=NS, subject="user:alice", attribute="city", value="Paris"),
        memory(
            "note",
            "plan",
            ns=NS,
            creator_id="reasoning:r",
            creator_kind="reasoning",
            creator_confidence=0.9,
        ),
    ):
        kept.record(rec, user if rec.creator_id == "user:alice" else None)
    return store, kept, fresh, clock


IDS = ("root", "price", "plan", "city", "note")


def decisions(engine: Engine) -> dict[str, tuple[str, float, tuple[str, ...]]]:
    out = {}
    for mid in IDS:
        d = engine.check(NS, "read", [mid], ACTOR).decision
        out[mid] = (d.effect, round(d.compliance_score, 12), tuple(r.policy for r in d.reasons))
    return out


def _derive(store: EmbeddedStore, clock: ManualClock) -> None:
    store.record(memory("weak", "root", ns=NS, creator_confidence=0.2))


def _revoke(store: EmbeddedStore, clock: ManualClock) -> None:
    store.revoke(NS, "root", reason="wrong")


def _revise(store: EmbeddedStore, clock: ManualClock) -> None:
    stored = store.get(NS, "plan")
    store.revise(
        memory("plan", "root", ns=NS, creator_id="agent:planner", creator_kind="agent"),
        expected_version=stored.version,
    )


def _update(store: EmbeddedStore, clock: ManualClock) -> None:
    stored = store.get(NS, "note")
    store.update(NS, "note", stored.version, {"creator_confidence": 0.4})


def _contradict(store: EmbeddedStore, clock: ManualClock) -> None:
    store.record(
        memory(
            "city2",
            ns=NS,
            creator_id="tool:geo",
            creator_kind="tool",
            subject="user:alice",
            attribute="city",
            value="Rome",
        )
    )


def _feedback(store: EmbeddedStore, clock: ManualClock) -> None:
    for _ in range(30):
        store.feedback(NS, ["plan"], False)


def _access(store: EmbeddedStore, clock: ManualClock) -> None:
    for _ in range(3):
        store.record_access(NS, ["city"])


def _time(store: EmbeddedStore, clock: ManualClock) -> None:
    clock.advance(6 * 3600)  # the price (volatility high, 10 min) decays away


CHANGES: dict[str, Callable[[EmbeddedStore, ManualClock], None]] = {
    "derivation": _derive,
    "revocation": _revoke,
    "revision": _revise,
    "update": _update,
    "contradicting claim": _contradict,
    "feedback": _feedback,
    "access statistics": _access,
    "time": _time,
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_kept_view_decides_as_a_fresh_read_after(
    world: tuple[CountingStore, Engine, Engine, ManualClock], change: str
) -> None:
    store, kept, fresh, clock = world
    before = decisions(kept)
    assert before == decisions(fresh)
    assert decisions(kept) == before  # answered from the kept views
    CHANGES[change](store, clock)
    after = decisions(fresh)
    assert after != before, f"{change}: the world did not change any decision"
    assert decisions(kept) == after


def test_a_view_is_read_again_only_when_something_it_holds_changed(
    world: tuple[CountingStore, Engine, Engine, ManualClock],
) -> None:
    store, kept, fresh, _clock = world
    kept.check(NS, "read", ["note"], ACTOR)
    read = store.views_read
    for _ in range(3):
        kept.check(NS, "read", ["note"], ACTOR)
    assert store.views_read == read  # kept
    store.record(memory("other", ns=NS))  # elsewhere in the namespace
    kept.check(NS, "read", ["note"], ACTOR)
    assert store.views_read == read  # still kept
    store.revoke(NS, "root", reason="wrong")  # an ancestor of note
    kept.check(NS, "read", ["note"], ACTOR)
    assert store.views_read == read + 1
    fresh.check(NS, "read", ["note"], ACTOR)
    assert store.views_read == read + 2  # keep_views = false reads every time


def test_a_namespace_filling_the_cache_evicts_only_its_own_views(monkeypatch) -> None:
    # An outside audit: the views were cleared whole when full, by whichever namespace
    # filled them, so that every other namespace read its lineage again.
    monkeypatch.setattr(view_cache, "LIMIT", 8)
    clock = ManualClock(T0)
    store = CountingStore(clock=clock)
    engine = Engine(
        store,
        PolicyHolder(str(REPO / "policies")),
        clock=clock,
        reuse_decisions=False,
        record_access=False,
        keep_views=True,
    )
    user = Creator("user", "user:alice")
    engine.record(memory("note", ns="tenant-b"), user)
    for i in range(30):
        engine.record(memory(f"m{i}", ns="tenant-a"), user)
    engine.check("tenant-b", "read", ["note"], ACTOR)
    read = store.views_read
    engine.check("tenant-b", "read", ["note"], ACTOR)
    assert store.views_read == read  # kept
    for i in range(30):
        engine.check("tenant-a", "read", [f"m{i}"], ACTOR)
    assert store.views_read == read + 30
    engine.check("tenant-b", "read", ["note"], ACTOR)
    assert store.views_read == read + 30  # tenant-b's view is still kept
    assert engine.views is not None
    assert 1 <= engine.views.held("tenant-a") <= 7 and engine.views.held("tenant-b") == 1
