"""A dangling id (a dependency or derivation naming a memory the store does not hold:
an older or damaged store) at exactly the loaded depth is passed over, as one within
the depth is, not reported as lineage to load.

Before, a walk that met it at the bound raised `LineageCut` ("raise lineage_depth"),
so the same damage decided one way a level inside the depth and another at it, and
raising the depth only moved the boundary. Now the snapshot asks the store, once per
id met there, whether the neighbour it did not load exists: a dangling one is skipped,
one that exists is still a cut. The ids found absent go into the decision's logged
input, so a replay walks as the decision did. Damage is made on a real Redis (the
record's key deleted, its derivation list left naming it)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from memlineage.engine.core import Engine
from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.replay import replay_lines
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store import open_store
from memlineage.store.base import LineageStore
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts
from memlineage_dsl.lineage_bound import LineageCut
from support.memories import T0, derivation_chain
from support.redis_servers import RedisServer
from support.sidecar import BUNDLED_POLICIES

NS = "default"
USER = Creator("user", "user:alice")
DEPTH = 3


def _engine(
    server: RedisServer, policies: str = BUNDLED_POLICIES, log: DecisionLog | None = None
) -> tuple[Engine, LineageStore]:
    clock = ManualClock(T0)
    store = open_store(server.emptied(), clock=clock)
    engine = Engine(
        store,
        PolicyHolder(policies),
        clock=clock,
        lineage_depth=DEPTH,
        log=log or DecisionLog(None),
        capture_inputs=log is not None,
    )
    return engine, store


def _chain(store: LineageStore, prefix: str, n: int, source: str = "user:alice") -> None:
    """`{prefix}0` by `source`, then `n` agent notes each built on the one before."""
    derivation_chain(store, source, n, prefix, NS)


def _damage(server: RedisServer, *ids: str) -> None:
    """Delete the records of `ids` (their dependants still name them)."""
    client = server.client()
    try:
        assert client.delete(*(f"ml:{{{NS}}}:m:{i}" for i in ids)) == len(ids)
    finally:
        client.close()


def test_a_dangling_dependency_at_the_depth_is_passed_over_as_within_it(
    redis_server: RedisServer,
) -> None:
    engine, store = _engine(redis_server)
    _chain(store, "b", DEPTH + 1)  # b4: b0 one past the depth
    _damage(redis_server, "b0")
    at = engine.check(NS, "read", ["b4"], USER).decision
    within = engine.check(NS, "read", ["b3"], USER).decision  # b0 within the depth
    assert at.effect == within.effect == "allow", (at, within)
    assert not at.errors and not within.errors
    # a decision that read an absence is not kept: the id may be recorded at any time
    _, ticket = engine.check_ticketed(NS, "read", ["b4"], USER)
    assert ticket is None
    ranked = engine.filter_rank(NS, [("b4", 0.9)], USER)
    assert ranked[0].kept and not ranked[0].decision.decision.errors


def test_a_stored_neighbour_beside_a_dangling_one_is_still_a_cut(
    redis_server: RedisServer,
) -> None:
    """The two are told apart per id: a dangling dependency does not excuse a stored
    one past the depth (a blocked source there fails `blocked_source` closed)."""
    engine, store = _engine(redis_server)
    store.record(MemoryRecord(id="gone", namespace=NS, creator_id="user:alice"))
    store.record(
        MemoryRecord(id="z", namespace=NS, creator_kind="tool", creator_id="tool:scraper_x")
    )
    store.record(
        MemoryRecord(id="c1", namespace=NS, creator_id="agent:a", dependencies=("gone", "z"))
    )
    for i in range(2, DEPTH + 2):
        store.record(
            MemoryRecord(
                id=f"c{i}", namespace=NS, creator_id="agent:a", dependencies=(f"c{i - 1}",)
            )
        )
    _damage(redis_server, "gone")
    d = engine.check(NS, "read", [f"c{DEPTH + 1}"], USER).decision
    assert d.effect == "deny" and d.errors, d
    assert "LineageCut" in d.errors[0] and "raise lineage_depth" in d.errors[0]
    assert "`c1` depends on `z`, not loaded" in d.errors[0]


DELETE = """
policy used_downstream priority 50 {
  on delete
  when count(d in descendants(memory) : d.status == active) > 3
  deny "too much is built on it"
}
"""


def test_a_dangling_derivation_at_the_depth_is_passed_over(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    (tmp_path / "rule.mlp").write_text(DELETE)
    engine, store = _engine(redis_server, str(tmp_path))
    _chain(store, "m", 5)
    _damage(redis_server, "m3")  # m2 still lists it as derived from it
    at = engine.check(NS, "delete", ["m0"], USER).decision  # m3 one past the depth
    assert at.effect == "allow" and not at.errors, at
    within = engine.check(NS, "delete", ["m1"], USER).decision  # m3 within it
    assert within.effect == "allow" and not within.errors, within
    _chain(store, "n", 5)  # undamaged: the descendants past the depth are a cut
    cut = engine.check(NS, "delete", ["n0"], USER).decision
    assert cut.effect == "deny" and "raise lineage_depth" in cut.errors[0], cut


def test_a_replay_passes_over_the_ids_the_decision_found_absent(
    redis_server: RedisServer,
) -> None:
    sink = io.StringIO()
    engine, store = _engine(redis_server, log=DecisionLog(sink))
    _chain(store, "b", DEPTH + 1)
    _damage(redis_server, "b0")
    assert engine.check(NS, "read", ["b4"], USER).decision.effect == "allow"
    text = sink.getvalue().splitlines()[-1]
    line = json.loads(text)
    assert line["input"]["absent"] == ["b0"]
    compiled = engine.policies.current.compiled
    report = replay_lines([("log", 1, text)], compiled)
    assert (report.unreadable, report.replayed, report.unchanged) == ([], 1, 1), report
    # without it (a log before it) the replay cannot tell: a cut, as before
    del line["input"]["absent"]
    report = replay_lines([("log", 1, json.dumps(line))], compiled)
    assert report.transitions == {("allow", "deny"): 1}, report


def test_the_snapshot_skips_an_id_known_absent_at_the_bound() -> None:
    ghost = MemoryFacts("a", dependencies=("gone",))
    top = MemoryFacts("b", dependencies=("a",))
    snap = DictSnapshot([ghost, top])
    snap.bound = (("b",), 1, 0, False)
    try:
        snap.ancestors("b")
    except LineageCut:
        pass
    else:
        raise AssertionError("not known absent: a cut")
    snap = DictSnapshot([ghost, top])
    snap.bound = (("b",), 1, 0, False)
    snap.absent = {"gone"}
    assert [m.id for m in snap.ancestors("b")] == ["a"]
