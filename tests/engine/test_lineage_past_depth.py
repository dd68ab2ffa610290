"""A walk past the lineage a decision loaded (`lineage_depth`) fails its rule closed.

The engine loads a decision's lineage `lineage_depth` levels up (and down); a walk
that needs more used to stop there silently, so a blocked or untrusted source one
derivation further up went unseen (an agent chaining 17 notes laundered a scraped
page past `blocked_source`). Such a walk now raises `LineageCut`: the rule fails at
run time, the decision is a fail-closed DENY naming lineage_depth, and is never kept
for reuse. A chain within the depth, and a walk with its own depth within it, decide
as before."""

from __future__ import annotations

import io
import json
from pathlib import Path

from memlineage.engine.acts import ActArgument
from memlineage.engine.core import Engine
from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.replay import replay_lines
from memlineage.engine.snapshot import snapshot_of
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.codegen import origins_of
from memlineage_dsl.decision import Decision
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts, UnknownMemory
from support.memories import T0, derivation_chain
from support.sidecar import BUNDLED_POLICIES

NS = "default"
USER = Creator("user", "user:alice")
AGENT = Creator("agent", "agent:assistant")
DEPTH = 16  # the engine's default, as served


def _engine(
    policies: str = BUNDLED_POLICIES, depth: int = DEPTH, log: DecisionLog | None = None
) -> tuple[Engine, EmbeddedStore]:
    """An engine loading `depth` levels of lineage (with `log`: capturing inputs)."""
    clock = ManualClock(T0)
    store = EmbeddedStore(clock=clock)
    engine = Engine(
        store,
        PolicyHolder(policies),
        clock=clock,
        lineage_depth=depth,
        log=log or DecisionLog(None),
        capture_inputs=log is not None,
    )
    return engine, store


def _chain(store: EmbeddedStore, source: str, derivations: int, prefix: str = "m") -> str:
    """`support.memories.derivation_chain` in this suite's namespace."""
    return derivation_chain(store, source, derivations, prefix, NS)


def _past(d: Decision, depth: int = DEPTH) -> bool:
    """A fail-closed DENY because a walk went past the loaded depth (an act's argument
    readers may fail too: an origin past it is unknown, as before)."""
    want = f"goes deeper than the lineage_depth ({depth}) loaded for this decision"
    return d.effect == "deny" and any(
        "LineageCut" in e and want in e and "raise lineage_depth" in e for e in d.errors
    )


def _failed(d: Decision) -> set[str]:
    return {r.policy for r in d.reasons if r.status == "error"}


def test_a_blocked_source_past_the_depth_fails_read_derive_and_act_closed() -> None:
    engine, store = _engine()
    top = _chain(store, "tool:scraper_x", DEPTH + 1)
    read = engine.check(NS, "read", [top], USER).decision
    assert _past(read), read
    assert "blocked_source" in _failed(read)
    assert f"the lineage of `{top}`" in read.errors[0]
    assert "`m1` depends on `m0`, not loaded" in " ".join(read.errors)
    derive = engine.record(
        MemoryRecord(id="next", namespace=NS, creator_id="agent:assistant", dependencies=(top,)),
        AGENT,
    )
    assert not derive.recorded and derive.decision.decision.effect == "deny"
    assert derive.decision.decision.errors  # past the depth: fail closed, not decided
    act = engine.act(NS, "book_hotel", [top], [], AGENT).decision
    assert _past(act), act
    assert "blocked_source" in _failed(act)
    ranked = engine.filter_rank(NS, [(top, 0.9), ("m3", 0.5)], USER)
    by_id = {c.memory_id: c for c in ranked}
    assert not by_id[top].kept and by_id[top].decision.decision == read
    # m3 is 3 derivations up: its whole lineage is loaded, the source seen
    assert not by_id["m3"].kept and not by_id["m3"].decision.decision.errors


def test_a_chain_of_exactly_the_depth_is_decided_as_before() -> None:
    engine, store = _engine()
    top = _chain(store, "tool:scraper_x", DEPTH)
    read = engine.check(NS, "read", [top], USER).decision
    assert read.effect == "deny" and not read.errors
    assert "blocked_source" in {r.policy for r in read.reasons if r.status == "fired"}
    act = engine.act(NS, "book_hotel", [top], [], AGENT).decision
    assert act.effect == "deny" and not act.errors
    ranked = engine.filter_rank(NS, [(top, 0.9)], USER)
    assert not ranked[0].kept and not ranked[0].decision.decision.errors
    # the same depth of a clean chain is used as before
    clean = _chain(store, "user:alice", DEPTH, prefix="c")
    assert engine.check(NS, "read", [clean], USER).decision.effect != "deny"
    assert [c.kept for c in engine.filter_rank(NS, [(clean, 0.9)], USER)] == [True]


def test_an_untrusted_chain_past_the_depth_cannot_drive_an_act() -> None:
    engine, store = _engine()
    top = _chain(store, "tool:web_search", DEPTH + 1)
    relied = engine.act(NS, "book_hotel", [top], [], AGENT).decision
    assert _past(relied), relied
    assert "untrusted_lineage_cannot_act" in _failed(relied)
    # an argument filled from it: its unloaded dependency is an unknown origin, as before
    filled = engine.act(
        NS, "send_money", [], [ActArgument("recipient", (top,)), ActArgument("amount")], AGENT
    ).decision
    assert filled.effect == "deny"
    assert "untrusted_lineage_cannot_act" in _failed(filled)
    within = _chain(store, "tool:web_search", DEPTH, prefix="w")
    d = engine.act(NS, "book_hotel", [within], [], AGENT).decision
    assert d.effect == "deny" and not d.errors
    assert "untrusted_lineage_cannot_act" in {r.policy for r in d.reasons if r.status == "fired"}


def test_act_origins_past_the_depth_stay_unknown_origins() -> None:
    """`origins_of` never raises: the dependency the bound left unloaded is an unknown
    origin (which no user made), as it was before the walk could fail."""
    _, store = _engine(depth=2)
    top = _chain(store, "tool:web_search", 4)
    view = store.lineage_view(NS, [top], ancestor_depth=2)
    snap, facts = snapshot_of(view.records, store, NS, T0, bound=((top,), 2, 0, False))
    found = origins_of(snap, facts[top])
    assert [(type(o), o.id) for o in found] == [(UnknownMemory, "m1")]


BOUNDED = """
policy near_bad priority 50 {
  on read
  when any(a in lineage(memory, 2) : "bad" in a.tags)
  deny "bad within two derivations"
}
"""


def test_a_walk_with_its_own_depth_within_the_loaded_one_decides_normally(
    tmp_path: Path,
) -> None:
    (tmp_path / "rule.mlp").write_text(BOUNDED)
    engine, store = _engine(str(tmp_path), depth=4)
    store.record(MemoryRecord(id="root", namespace=NS, creator_id="user:alice", tags=("bad",)))
    prev = "root"
    for i in range(1, 12):
        store.record(
            MemoryRecord(id=f"n{i}", namespace=NS, creator_id="user:alice", dependencies=(prev,))
        )
        prev = f"n{i}"
    near = engine.check(NS, "read", ["n2"], USER).decision
    assert near.effect == "deny" and not near.errors
    far = engine.check(NS, "read", ["n11"], USER).decision
    assert far.effect == "allow" and not far.errors
    ranked = engine.filter_rank(NS, [(f"n{i}", 0.5) for i in range(1, 12)], USER)
    assert [c.kept for c in ranked] == [False, False, *[True] * 9]
    assert not any(c.decision.decision.errors for c in ranked)


def test_a_decision_past_the_depth_is_not_kept_for_reuse() -> None:
    engine, store = _engine(depth=3)
    top = _chain(store, "user:alice", 5)
    first, ticket = engine.check_ticketed(NS, "read", [top], USER)
    assert _past(first.decision, 3) and ticket is None
    again = engine.check(NS, "read", [top], USER)
    assert again.decision == first.decision
    engine.filter_rank(NS, [(top, 0.5)], USER)
    assert engine.reused == 0


DELETE = """
policy used_downstream priority 50 {
  on delete
  when count(d in descendants(memory) : d.status == active) > 3
  deny "too much is built on it"
}
"""


def test_a_descendant_walk_past_the_depth_fails_closed(tmp_path: Path) -> None:
    (tmp_path / "rule.mlp").write_text(DELETE)
    engine, store = _engine(str(tmp_path), depth=2)
    top = _chain(store, "user:alice", 5)
    assert top == "m5"
    deep = engine.check(NS, "delete", ["m0"], USER).decision
    assert deep.effect == "deny" and deep.errors
    assert "the descendants of `m0` go deeper than the lineage_depth (2)" in deep.errors[0]
    assert "`m2` has the derivation `m3`, not loaded" in deep.errors[0]
    near = engine.check(NS, "delete", ["m3"], USER).decision  # m4, m5: within the depth
    assert near.effect == "allow" and not near.errors


def test_a_dependency_the_store_does_not_hold_is_skipped_within_the_depth() -> None:
    """Below the bound, a dependency not held is one that does not exist (a damaged or
    older store): the walk goes on without it, as before; at the bound it is a cut."""
    ghost = MemoryFacts("a", dependencies=("gone",))
    top = MemoryFacts("b", dependencies=("a",))
    snap = DictSnapshot([ghost, top])
    snap.bound = (("b",), 2, 0, False)
    assert [m.id for m in snap.ancestors("b")] == ["a"]
    from memlineage_dsl.lineage_bound import LineageCut  # here: the others run without it

    snap = DictSnapshot([ghost, top])
    snap.bound = (("b",), 1, 0, False)
    try:
        snap.ancestors("b")
    except LineageCut as cut:
        assert [m.id for m in cut.walked] == ["a"]
        assert "`a` depends on `gone`, not loaded" in str(cut)
    else:
        raise AssertionError("a dependency past the bound is a cut")
    # no bound (the test runner gives the whole store): nothing is ever a cut
    assert [m.id for m in DictSnapshot([ghost, top]).ancestors("b")] == ["a"]


def test_a_replay_fails_the_same_walks_closed() -> None:
    sink = io.StringIO()
    engine, store = _engine(depth=3, log=DecisionLog(sink))
    holder = engine.policies
    deep = _chain(store, "user:alice", 5)
    d = engine.check(NS, "read", [deep], USER).decision
    assert _past(d, 3)
    line = json.loads(sink.getvalue().splitlines()[-1])
    assert line["input"]["bound"] == [[deep], 3, 0, False]
    lines = [("log", n, t) for n, t in enumerate(sink.getvalue().splitlines(), 1)]
    report = replay_lines(lines, holder.current.compiled)
    assert (report.unreadable, report.replayed, report.unchanged) == ([], 1, 1), report
