"""A Record decides on the current holder of its claim (`target`) with the holder's
lineage loaded, to the same bound as its dependencies', and fails closed past it.

Before, Record loaded its own id and its dependencies' lineage, then added the holder
alone: a write or derive rule walking `ancestors(target)` or `descendants(target)`
met the holder's first neighbour unloaded and failed closed ("was not loaded for this
decision"), whatever the holder rested on, so such a rule denied every new value of a
claim whose holder had any lineage. Now the holder is a root of the view."""

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
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0

NS = "default"
AGENT = Creator("agent", "agent:assistant")
DEPTH = 3

RULES = """
policy rests_on_the_user priority 100 {
  on write, derive
  when target.id != memory.id and memory.creator.kind != user
    and any(a in ancestors(target) : a.creator.kind == user)
  deny "a claim resting on what the user stated is replaced by the user only"
}

policy built_upon priority 90 {
  on write, derive
  when target.id != memory.id and count(d in descendants(target) : true) > 2
  deny "a claim with much built on it is not replaced"
}
"""


def _engine(tmp_path: Path, log: DecisionLog | None = None) -> Engine:
    (tmp_path / "rules.mlp").write_text(RULES)
    clock = ManualClock(T0)
    return Engine(
        EmbeddedStore(clock=clock),
        PolicyHolder(str(tmp_path)),
        clock=clock,
        lineage_depth=DEPTH,
        log=log or DecisionLog(None),
        capture_inputs=log is not None,
    )


def _rec(
    mid: str, creator: str, deps: tuple[str, ...] = (), claim: tuple[str, str] | None = None
) -> MemoryRecord:
    """A memory by `creator` on `deps`; with `claim` (subject, value): its city."""
    subject, value = claim or (None, None)
    return MemoryRecord(
        id=mid,
        namespace=NS,
        creator_kind=creator.split(":")[0],
        creator_id=creator,
        dependencies=deps,
        subject=subject,
        attribute="city" if claim else None,
        value=value,
    )


def _claim(subject: str, value: str) -> tuple[str, str]:
    return (subject, value)


def _chain(engine: Engine, prefix: str, n: int, source: str) -> str:
    """`{prefix}0` by `source`, then `n` agent notes each on the one before; the top."""
    assert engine.record(_rec(f"{prefix}0", source), Creator.parse(source)).recorded
    for i in range(1, n + 1):
        note = _rec(f"{prefix}{i}", "agent:assistant", (f"{prefix}{i - 1}",))
        assert engine.record(note, AGENT).recorded
    return f"{prefix}{n}"


def test_a_write_walks_the_holders_ancestors(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    user_based = _chain(engine, "u", 1, "user:alice")
    holder = _rec("h", "agent:assistant", (user_based,), claim=_claim("user:alice", "Paris"))
    assert engine.record(holder, AGENT).recorded
    over = engine.record(_rec("w", "agent:assistant", claim=_claim("user:alice", "Rome")), AGENT)
    d = over.decision.decision
    assert not over.recorded and d.effect == "deny" and not d.errors, d
    assert "rests_on_the_user" in {r.policy for r in d.reasons if r.status == "fired"}

    agent_based = _chain(engine, "g", 2, "agent:planner")
    holder = _rec("k", "agent:assistant", (agent_based,), claim=_claim("user:bob", "Oslo"))
    assert engine.record(holder, AGENT).recorded
    for op, deps in (("derive", (agent_based,)), ("write", ())):
        new = _rec(f"k-{op}", "agent:assistant", deps, claim=_claim("user:bob", f"Bergen {op}"))
        done = engine.record(new, AGENT)
        assert done.recorded and not done.decision.decision.errors, done.decision
        assert done.decision.decision.effect == "allow"


def test_a_write_walks_the_holders_descendants(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    assert engine.record(
        _rec("h", "agent:assistant", claim=_claim("user:carol", "Lima")), AGENT
    ).recorded
    for i in range(3):
        assert engine.record(_rec(f"on{i}", "agent:assistant", ("h",)), AGENT).recorded
    over = engine.record(_rec("w", "agent:assistant", claim=_claim("user:carol", "Quito")), AGENT)
    d = over.decision.decision
    assert not over.recorded and d.effect == "deny" and not d.errors, d
    assert "built_upon" in {r.policy for r in d.reasons if r.status == "fired"}


def test_a_holder_deeper_than_the_depth_fails_closed(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    deep = _chain(engine, "d", DEPTH, "agent:planner")  # the holder's source one past
    holder = _rec("h", "agent:assistant", (deep,), claim=_claim("user:dan", "Kyiv"))
    assert engine.record(holder, AGENT).recorded
    over = engine.record(_rec("w", "agent:assistant", claim=_claim("user:dan", "Lviv")), AGENT)
    d = over.decision.decision
    assert not over.recorded and d.effect == "deny", d
    assert any(
        f"goes deeper than the lineage_depth ({DEPTH})" in e and "raise lineage_depth" in e
        for e in d.errors
    ), d.errors


def test_a_record_over_a_holder_replays_as_decided(tmp_path: Path) -> None:
    sink = io.StringIO()
    engine = _engine(tmp_path, DecisionLog(sink))
    user_based = _chain(engine, "u", 1, "user:alice")
    holder = _rec("h", "agent:assistant", (user_based,), claim=_claim("user:alice", "Paris"))
    assert engine.record(holder, AGENT).recorded
    assert not engine.record(
        _rec("w", "agent:assistant", claim=_claim("user:alice", "Rome")), AGENT
    ).recorded
    last = json.loads(sink.getvalue().splitlines()[-1])
    assert last["input"]["bound"][0] == ["w", "h"]
    lines = [("log", n, t) for n, t in enumerate(sink.getvalue().splitlines(), 1)]
    report = replay_lines(lines, engine.policies.current.compiled)
    assert (report.unreadable, report.unchanged, report.approximate) == ([], report.replayed, 0)
