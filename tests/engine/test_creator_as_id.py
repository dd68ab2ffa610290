"""A creator stands for its id wherever a policy uses it as a string, as the checker
and docs/language.md allow: `==` a string, `in` a source list or a list of strings,
`matches` a glob or a list of globs, an obligation's argument, `calls(memory.creator,
...)`. Before, the object passed through: `==` never fired (a deny rule that silently
did nothing), `in`/`matches` raised (every decision a fail-closed DENY) and
`refresh(memory.creator)` sent `Creator(kind='tool', ...)` as its source."""

from __future__ import annotations

import tempfile
from pathlib import Path

from memlineage.engine.core import Engine
from memlineage.engine.decision_input import ReplaySnapshot
from memlineage.engine.policies import PolicyHolder
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.memories import T0
from support.mlp import test_failures

POLICY = """
sources blocked = ["tool:scraper_*"]

policy by_equality priority 40 {
  on read
  when memory.creator == "tool:scraper_v2"
  deny "equal"
}

policy by_source_list priority 39 {
  on read
  when memory.creator in blocked
  deny "listed"
}

policy by_string_list priority 38 {
  on read
  when memory.creator in ["tool:crawler", "tool:spider"]
  deny "in a list"
}

policy by_glob_list priority 37 {
  on read
  when memory.creator.id matches ["tool:fetch_*", "tool:get_*"]
  deny "matched"
}

policy refresh_from_creator priority 30 {
  on read
  when memory.creator.kind == tool and age(memory) > 1h
  degrade refresh(memory.creator)
}

policy chatty priority 20 {
  on write
  when calls(memory.creator, 1h) >= 2
  deny "at most 2 an hour from one creator"
}

test "each use of a creator as a string" {
  given memory a { creator: "tool:scraper_v2" }
  given memory b { creator: "tool:scraper_v9" }
  given memory c { creator: "tool:crawler" }
  given memory d { creator: "tool:fetch_page" }
  given memory w { creator: "tool:weather", created_at: now - 2h }
  given memory u { creator: "user:alice" }
  expect read a -> deny
  expect read b -> deny
  expect read c -> deny
  expect read d -> deny
  expect read w -> degrade with refresh("tool:weather")
  expect read u -> allow
}
"""


def test_the_language_runs_a_creator_as_its_id() -> None:
    assert test_failures({"p.mlp": POLICY}) == []


def test_the_sidecar_runs_a_creator_as_its_id() -> None:
    """The same on the engine's own snapshot: obligations on the wire name the id, and
    `calls(memory.creator, 1h)` reads that creator's counter."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "p.mlp").write_text(POLICY)
        clock = ManualClock(T0)
        engine = Engine(EmbeddedStore(clock=clock), PolicyHolder(d), clock=clock)

        def record(mid: str, creator: str, age: float = 0.0) -> bool:
            rec = MemoryRecord(
                id=mid,
                namespace="default",
                creator_id=creator,
                creator_kind="",
                created_at=clock() - age,
            )
            return engine.record(rec).recorded

        asker = Creator("user", "user:alice")
        assert record("a", "tool:scraper_v2") and record("w", "tool:weather", 7200)
        got = engine.check("default", "read", ["a"], asker).decision
        assert got.effect == "deny" and not got.errors
        refresh = engine.check("default", "read", ["w"], asker).decision
        assert [(o.kind, o.args) for o in refresh.obligations] == [("refresh", ("tool:weather",))]
        assert record("t1", "tool:echo") and record("t2", "tool:echo")
        assert not record("t3", "tool:echo")  # its third in the hour
        assert record("t4", "tool:other")


def test_a_replay_counts_a_creators_calls_by_its_id() -> None:
    """`memlineage replay` reads the counts a decision logged, keyed by the source's
    id; `calls(memory.creator, 1h)` hands it the creator, which finds the same count."""
    snap = ReplaySnapshot([], {("tool:weather", 3600.0): 2})
    assert snap.calls(Creator("tool", "tool:weather"), 3600.0, T0) == 2
    assert snap.calls("tool:weather", 3600.0, T0) == 2
    assert snap.missing == []
