"""`acts()` counts on one store counter per set of globs: a policy edit that
reorders, repeats or unwraps a pattern list keeps the count (before, the counter was
keyed by the list as written, so reformatting a rate limit reset it), and two
spellings of one pattern in a set count an action once."""

from __future__ import annotations

from pathlib import Path

from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0

NS = "default"
AGENT = Creator("agent", "agent:payer")
LISTED = """
actions payments = {globs}

policy cap priority 90 {{
  on act
  when request.action in payments and acts(payments, 1h) >= 2
  deny "at most two payments an hour"
}}
"""
ONE = """
policy cap priority 90 {{
  on act
  when request.action matches {glob} and acts({glob}, 1h) >= 2
  deny "at most two payments an hour"
}}
"""


def engine_with(policy_dir: Path, text: str) -> tuple[Engine, PolicyHolder]:
    policy_dir.mkdir(exist_ok=True)
    (policy_dir / "cap.mlp").write_text(text)
    clock = ManualClock(T0)
    holder = PolicyHolder(str(policy_dir))
    engine = Engine(EmbeddedStore(clock=clock), holder, clock=clock, reuse_decisions=False)
    rec = MemoryRecord(id="invoice", namespace=NS, creator_id="user:alice", created_at=T0)
    assert engine.record(rec).recorded
    return engine, holder


def pay(engine: Engine, action: str = "pay_invoice") -> str:
    return engine.act(NS, action, ["invoice"], [], AGENT).decision.effect


def test_a_reordered_pattern_list_keeps_its_count(tmp_path: Path) -> None:
    engine, holder = engine_with(tmp_path / "p", LISTED.format(globs='["pay_*", "transfer_*"]'))
    assert pay(engine) == "allow"
    # the same globs, reordered and one repeated: the count goes on
    (tmp_path / "p" / "cap.mlp").write_text(
        LISTED.format(globs='["transfer_*", "pay_*", "transfer_*"]')
    )
    assert holder.reload().applied
    assert pay(engine, "transfer_funds") == "allow"
    assert pay(engine) == "deny"  # its third in the hour


def test_one_glob_in_a_list_or_alone_counts_alike(tmp_path: Path) -> None:
    engine, holder = engine_with(tmp_path / "p", LISTED.format(globs='["pay_*"]'))
    assert pay(engine) == "allow"
    (tmp_path / "p" / "cap.mlp").write_text(ONE.format(glob='"pay_*"'))
    assert holder.reload().applied
    assert pay(engine) == "allow"
    assert pay(engine) == "deny"


def test_two_spellings_in_one_set_count_an_action_once(tmp_path: Path) -> None:
    also = """
actions pays = ["pay_*"]

policy watch priority 10 {
  on act
  when acts(pays, 1h) >= 5
  deny "never reached in this test"
}
"""
    engine, _holder = engine_with(tmp_path / "p", ONE.format(glob='"pay_*"') + also)
    assert pay(engine) == "allow"
    assert pay(engine) == "allow"  # counted once each: 2 so far, not 4
    assert pay(engine) == "deny"


def test_a_shadow_candidates_rate_rule_counts_from_its_load(tmp_path: Path) -> None:
    """A candidate adding a rate rule sees the actions allowed since it was loaded:
    the shadow reports the acts it would deny, and once promoted it goes on from that
    count (an outside audit: its counter was never moved, the shadow said 0 disagreed
    and the promoted set allowed the sixth act)."""
    clock = ManualClock(T0)
    served = tmp_path / "served"
    served.mkdir()
    (served / "open.mlp").write_text(
        'policy doubt priority 5 {\n  on act\n  when memory.confidence < 0.1\n  deny "no"\n}\n'
    )
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "cap.mlp").write_text(LISTED.format(globs='["pay_*"]'))
    engine = Engine(
        EmbeddedStore(clock=clock), PolicyHolder(str(served)), clock=clock, reuse_decisions=False
    )
    rec = MemoryRecord(id="invoice", namespace=NS, creator_id="user:alice", created_at=T0)
    assert engine.record(rec).recorded
    engine.shadow_dir = str(candidate)
    status, problems = engine.shadow_load()
    assert status.active, problems
    assert [pay(engine) for _ in range(5)] == ["allow"] * 5  # the serving set has no cap
    status = engine.shadow.status()
    assert (status.compared, status.disagreed) == (5, 3), status
    assert [(d.policy, d.serving, d.candidate, d.count) for d in status.diffs] == [
        ("cap", "allow", "deny", 3)
    ]
    engine.shadow_promote()
    assert pay(engine) == "deny"  # five counted already
