"""A replay whose candidate walks lineage the logged decision loaded none of is an
approximation, counted and guarded by `--fail-on approximations`.

The engine loads lineage only the ways the serving set's policies walk (an update
whose rules walk none loads the memory alone; a read loads ancestors, not
descendants). The logged input holds only what was loaded, so a candidate walking
`ancestors` of an update, or `descendants` of a read, was re-decided on less than the
live engine would load for it: silently (no `bound` logged: the facts taken as all
there is; or no derivations logged: none found), or as a fail-closed cut saying
"raise lineage_depth" of a depth of 0. Now such a walk decides on the logged facts and
the replay says it is approximate. A walk the logged decision did load replays
exactly, and a log written before `bound` was always logged reads as before."""

from __future__ import annotations

import io
import json
from pathlib import Path

from memlineage.engine.core import Engine
from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.replay import render, replay_command, replay_lines
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.compiler import CompiledPolicySet
from memlineage_dsl.facts import Creator
from memlineage_dsl.pipeline import build_texts
from support.memories import T0

NS = "default"
USER = Creator("user", "user:alice")

SERVING = """
policy plain priority 10 {
  on read, update
  when memory.type == "secret"
  deny "secret"
}
"""
DOWN = """
policy built_upon priority 10 {
  on update
  when count(d in descendants(memory) : true) > 5
  deny "much is built on it"
}
"""
UP = """
policy from_the_web priority 50 {
  on update, read
  when any(a in ancestors(memory) : a.creator.kind == tool)
  deny "rests on a tool's output"
}
"""
BELOW = """
policy used priority 50 {
  on read
  when count(d in descendants(memory) : true) > 0
  deny "something is built on it"
}
"""


def _served(serving: str, tmp_path: Path) -> tuple[list[tuple[str, int, str]], Path]:
    """The log of an update and a read of `note` (on a web page, one note built on
    it) decided by `serving`, written to a file."""
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "p.mlp").write_text(serving)
    sink = io.StringIO()
    clock = ManualClock(T0)
    store = EmbeddedStore(clock=clock)
    engine = Engine(
        store,
        PolicyHolder(str(tmp_path / "serving")),
        clock=clock,
        log=DecisionLog(sink),
        reuse_decisions=False,
        capture_inputs=True,
    )
    store.record(MemoryRecord("page", NS, creator_kind="tool", creator_id="tool:web"))
    store.record(MemoryRecord("note", NS, creator_id="agent:a", dependencies=("page",)))
    store.record(MemoryRecord("on", NS, creator_id="agent:a", dependencies=("note",)))
    assert engine.check(NS, "update", ["note"], USER).decision.effect == "allow"
    assert engine.check(NS, "read", ["note"], USER).decision.effect == "allow"
    text = sink.getvalue()
    log = tmp_path / "decisions.log"
    log.write_text(text)
    return [("log", n, t) for n, t in enumerate(text.splitlines(), 1)], log


def _set(text: str) -> CompiledPolicySet:
    built = build_texts({"c.mlp": text})
    assert built.compiled is not None
    return built.compiled


def test_an_update_that_loaded_no_lineage_replays_an_ancestor_walk_approximately(
    tmp_path: Path,
) -> None:
    lines, log = _served(SERVING, tmp_path)
    update = json.loads(lines[0][2])["input"]
    assert update["op"] == "update" and "page" not in update["facts"]  # the memory alone
    report = replay_lines(lines[:1], _set(UP))
    assert (report.replayed, report.approximate) == (1, 1), report
    assert report.unloaded == 1 and update["bound"] == [["note"], 0, 0, False]
    out = io.StringIO()
    render(report, out)
    assert "1 walked lineage (ancestors, descendants) the logged decision did not load" in (
        out.getvalue()
    )
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "c.mlp").write_text(UP)
    out = io.StringIO()
    assert replay_command([str(log)], str(tmp_path / "up"), "approximations", out, 1) == 1
    assert "1 walked lineage, the logged decision had not)" in out.getvalue()
    # the read loaded the ancestors: the same walk replays exactly, the tool seen
    read = replay_lines(lines[1:], _set(UP))
    assert (read.unloaded, read.approximate) == (0, 0), read
    assert read.transitions == {("allow", "deny"): 1}


def test_a_walk_the_decision_loaded_the_other_way_only_is_not_a_cut(tmp_path: Path) -> None:
    """Descendants loaded, ancestors not: an ancestor walk is not failed closed as
    "deeper than the lineage_depth (0)"."""
    lines, _ = _served(DOWN, tmp_path)
    update = json.loads(lines[0][2])["input"]
    assert update["bound"][1:] == [0, 16, False]
    report = replay_lines(lines[:1], _set(UP))
    assert not report.transitions, report  # decided on the facts: not a fail-closed deny
    assert (report.approximate, report.unloaded) == (1, 1), report


def test_a_read_replays_a_descendant_walk_approximately(tmp_path: Path) -> None:
    lines, _ = _served(SERVING, tmp_path)
    read = json.loads(lines[1][2])["input"]
    assert read["bound"][1:] == [16, 0, False] and "on" not in read["facts"]
    report = replay_lines(lines[1:], _set(BELOW))
    assert report.approximate == 1, report  # before: no derivation logged, none found
    assert report.unloaded == 1
    same = replay_lines(lines, _set(SERVING))
    assert (same.approximate, same.unloaded, same.unchanged) == (0, 0, 2), same


def test_a_log_without_bound_reads_as_before(tmp_path: Path) -> None:
    lines, _ = _served(SERVING, tmp_path)
    line = json.loads(lines[0][2])
    line["input"].pop("bound", None)
    report = replay_lines([("log", 1, json.dumps(line))], _set(UP))
    assert (report.replayed, report.approximate, report.unchanged) == (1, 0, 1), report
