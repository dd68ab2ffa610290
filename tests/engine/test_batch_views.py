"""A FilterRank decides each candidate as a Check of that candidate alone does, whatever
else the batch loads: on random DAGs, with short lineage depths (views cut by depth),
policies walking ancestors, lineage and descendants (views touched by co-parents), and
reliability capped along the chain."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage.engine.batch_views import divergent, own_view
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0

NS = "default"
USER = Creator("user", "user:alice")
POLICIES = """
policy tainted priority 90 {
  on read
  when any(a in ancestors(memory) : "bad" in a.tags)
  deny "rests on a bad memory"
}

policy weak_chain priority 50 {
  on read
  when min(a in lineage(memory) : a.confidence) < 0.5
  degrade downrank(0.5) "a weak memory in its chain"
}

policy weak_use priority 40 {
  on read
  when any(x in descendants(memory) : x.reliability < 0.4)
  degrade annotate("something built on it is weak")
}

policy grounded priority 30 {
  on read
  when not any(a in ancestors(memory) : a.creator.kind == user) and memory.dependencies != []
  degrade annotate("no user memory at its roots")
}
"""


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[tuple[str, tuple[str, ...], str, float, bool]], int]:
    """Up to 14 memories on up to 3 earlier ones: (id, deps, creator, confidence, bad)."""
    n = draw(st.integers(2, 14))
    out = []
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        out.append(
            (
                f"m{i}",
                tuple(f"m{d}" for d in deps),
                draw(st.sampled_from(("user:alice", "agent:a", "reasoning:r", "tool:t"))),
                draw(st.sampled_from((0.3, 0.6, 0.9))),
                draw(st.booleans()) and draw(st.booleans()),
            )
        )
    return out, draw(st.integers(1, 3))


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(world=worlds(), picks=st.lists(st.integers(0, 13), min_size=2, max_size=6, unique=True))
def test_each_candidate_is_decided_as_its_own_check(
    tmp_path: Path, world: tuple[list, int], picks: list[int]
) -> None:
    memories, depth = world
    policy_dir = tmp_path / f"p{depth}"
    if not policy_dir.exists():
        policy_dir.mkdir()
        (policy_dir / "rules.mlp").write_text(POLICIES)
    clock = ManualClock(T0)
    store = EmbeddedStore(clock=clock)
    engine = Engine(
        store,
        PolicyHolder(str(policy_dir)),
        clock=clock,
        reuse_decisions=False,
        record_access=False,
        lineage_depth=depth,
    )
    for mid, deps, creator, confidence, bad in memories:
        store.record(
            MemoryRecord(
                id=mid,
                namespace=NS,
                creator_kind=creator.split(":")[0],
                creator_id=creator,
                creator_confidence=confidence,
                dependencies=deps,
                tags=("bad",) if bad else (),
            )
        )
    ids = [f"m{i}" for i in picks if i < len(memories)]
    # Three batches on one engine: the later ones find heights the earlier ones kept
    # (`divergent`'s memo), after a memory built on some candidates was recorded.
    batches = [ids, [*ids[::-1], "z"], ["z", *(f"m{i}" for i in range(len(memories)))]]
    for n, batch in enumerate(batches):
        if n == 1:
            store.record(
                MemoryRecord(
                    id="z", namespace=NS, creator_id="user:alice", dependencies=tuple(ids[:2])
                )
            )
        ranked = engine.filter_rank(NS, [(m, 0.5) for m in batch], USER)
        for c in ranked:
            alone = engine.check(NS, "read", [c.memory_id], USER)
            assert c.decision.decision == alone.decision, (c.memory_id, batch, depth)


def _record(store: EmbeddedStore, mid: str, *deps: str) -> None:
    store.record(MemoryRecord(id=mid, namespace=NS, creator_id="user:alice", dependencies=deps))


def test_a_view_cut_by_depth_under_another_candidates_lineage_is_divergent() -> None:
    """m -> a -> b -> x -> y and s -> x, depth 3: m's own view stops at x, whose parent y
    the batch loaded for s; s's view (s, x, y) is whole."""
    store = EmbeddedStore()
    for mid, deps in (("y", ()), ("x", ("y",)), ("b", ("x",)), ("a", ("b",)), ("m", ("a",))):
        _record(store, mid, *deps)
    _record(store, "s", "x")
    records = store.lineage_view(NS, ["m", "s"], ancestor_depth=3).records
    assert set(records) == {"m", "a", "b", "x", "y", "s"}
    out = divergent(records, ["m", "s"], 3, 0)
    assert list(out) == ["m"] and set(out["m"]) == {"m", "a", "b", "x"}
    assert set(own_view(records, "s", 3, 0)) == {"s", "x", "y"}
    assert divergent(records, ["m", "s"], 4, 0) == {}  # deep enough: both whole


def test_only_whole_ancestries_are_kept_across_batches() -> None:
    """`known` keeps a candidate's height only when its ancestry was loaded whole (s:
    2 below depth 3), never one a view cut (m: 3 or more), so m stays divergent in a
    later batch that finds s known."""
    store = EmbeddedStore()
    for mid, deps in (("y", ()), ("x", ("y",)), ("b", ("x",)), ("a", ("b",)), ("m", ("a",))):
        _record(store, mid, *deps)
    _record(store, "s", "x")
    records = store.lineage_view(NS, ["m", "s"], ancestor_depth=3).records
    known: dict[int, tuple[MemoryRecord, int]] = {}
    for _ in range(2):
        out = divergent(records, ["m", "s"], 3, 0, known)
        assert list(out) == ["m"]
        assert [(rec.id, h) for rec, h in known.values()] == [("s", 2)]
    # another object for s (its row rewritten): found again, not taken on trust
    other = {**records, "s": dataclasses.replace(records["s"])}
    assert list(divergent(other, ["m", "s"], 3, 0, known)) == ["m"]
    assert any(rec is other["s"] for rec, _ in known.values())
