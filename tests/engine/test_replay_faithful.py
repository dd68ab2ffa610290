"""Replay re-decides a logged line as it was served: the asker's kind as the request
gave it (an id may name none), and a score the serving set did not read (logged at
its default) said to make the replay approximate (an outside audit: an update by
`Actor(user, "ops:alice")` served ALLOW replayed as DENY, and a candidate reading
reliability replayed a memory of reliability ~1e-11 as 1.0, with no word)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

from memlineage.engine.core import Engine
from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.replay import render, replay_command, replay_lines
from memlineage.lineage.clock import ManualClock
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from memlineage_dsl.pipeline import build_texts
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES


def _engine(policies: Path | str) -> tuple[Engine, io.StringIO, PolicyHolder]:
    sink = io.StringIO()
    holder = PolicyHolder(policies)
    engine = Engine(
        EmbeddedStore(), holder, log=DecisionLog(sink), reuse_decisions=False, capture_inputs=True
    )
    return engine, sink, holder


def _lines(sink: io.StringIO) -> list[tuple[str, int, str]]:
    return [("log", n, text) for n, text in enumerate(sink.getvalue().splitlines(), 1)]


def test_an_actor_whose_id_names_no_kind_replays_as_served() -> None:
    engine, sink, holder = _engine(BUNDLED_POLICIES)
    user = Creator("user", "user:alice")
    engine.record(MemoryRecord("city", "default", creator_id="user:alice"), user)
    for asker in (Creator("user", "ops:alice"), Creator("user", "alice")):
        d = engine.check("default", "update", ("city",), asker)
        assert d.decision.effect == "allow"  # a user changes what the user stated
    logged = [json.loads(text) for _, _, text in _lines(sink)][-2:]
    assert [x["input"]["actor"] for x in logged] == [["user", "ops:alice"], ["user", "alice"]]
    report = replay_lines(_lines(sink), holder.current.compiled)
    assert (report.unreadable, report.replayed, report.unchanged) == ([], 3, 3), report


def test_an_old_lines_kind_colon_id_actor_still_replays() -> None:
    engine, sink, holder = _engine(BUNDLED_POLICIES)
    engine.record(
        MemoryRecord("city", "default", creator_id="user:alice"), Creator("user", "user:alice")
    )
    engine.check("default", "read", ("city",), Creator("agent", "agent:p"))
    line = json.loads(sink.getvalue().splitlines()[-1])
    line["input"]["actor"] = "agent:p"  # as logs before [kind, id] wrote it
    del line["input"]["scored"]
    report = replay_lines([("old", 1, json.dumps(line))], holder.current.compiled)
    assert (report.unreadable, report.unchanged, report.unscored) == ([], 1, 0), report


def test_a_score_the_serving_set_did_not_read_makes_its_replay_approximate(
    tmp_path: Path,
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "a.mlp").write_text('policy p { on read when memory.confidence < 0.1 deny "x" }\n')
    reads = build_texts(
        {"a.mlp": 'policy q { on read when memory.reliability < 0.3 degrade "y" }\n'}
    )
    assert reads.compiled is not None
    engine, sink, holder = _engine(served)
    engine.record(
        MemoryRecord("note", "default", creator_id="tool:web", creator_confidence=0.2),
        Creator("tool", "tool:web"),
    )
    engine.check("default", "read", ("note",), Creator("agent", "agent:p"))
    [*_, last] = [json.loads(text) for _, _, text in _lines(sink)]
    assert last["input"]["scored"] == []  # the serving set reads no score
    assert replay_lines(_lines(sink), holder.current.compiled).unscored == 0
    report = replay_lines(_lines(sink), reads.compiled)
    out = io.StringIO()
    render(report, out)
    assert report.unscored == 1, report
    assert "1 read a score (reliability, value_score)" in out.getvalue()


def _approximate_log(tmp_path: Path) -> tuple[Path, Path, dict[str, Path]]:
    """A log served by a set reading neither scores nor rate counters, and candidates:
    `same` (that set), `scores` (reads reliability), `counters` (reads a rate counter):
    unchanged answers all, the last two replayed approximately."""
    sets = {
        "same": 'policy p { on read when memory.confidence < 0.1 deny "x" }\n',
        "scores": 'policy q { on read when memory.reliability < 0.3 degrade "y" }\n',
        "counters": 'policy r { on read when calls("tool:web", 1h) > 100 deny "z" }\n',
    }
    dirs = {}
    for name, text in sets.items():
        dirs[name] = tmp_path / name
        dirs[name].mkdir()
        (dirs[name] / "a.mlp").write_text(text)
    engine, sink, _ = _engine(dirs["same"])
    engine.record(
        MemoryRecord("note", "default", creator_id="tool:web", creator_confidence=0.2),
        Creator("tool", "tool:web"),
    )
    for _ in range(2):
        engine.check("default", "read", ("note",), Creator("agent", "agent:p"))
    log = tmp_path / "decisions.log"
    log.write_text(sink.getvalue())
    return log, dirs["same"], dirs


def test_fail_on_approximations_fails_a_replay_that_was_not_exact(tmp_path: Path) -> None:
    """`--fail-on approximations` exits 1 when a decision was replayed approximately
    (a score or a rate counter the logged decision had not read), with a line saying
    how many and why; 0 when every one replayed exactly. `any` (the changes) is as
    before, and a list takes both (before: an approximate replay exited 0 whatever was
    asked, so a CI gate passed on answers it had not reproduced)."""
    log, served, sets = _approximate_log(tmp_path)
    expected = {
        ("same", "approximations"): 0,
        ("scores", "approximations"): 1,
        ("counters", "approximations"): 1,
        ("scores", "any"): 0,
        ("counters", "any"): 0,
        ("scores", "any,approximations"): 1,
        ("counters", "allow->deny, approximations"): 1,
        ("scores", ""): 0,
    }
    said = {}
    for (name, guard), code in expected.items():
        out = io.StringIO()
        got = replay_command([str(log)], str(sets[name]), guard, out, 1)
        assert got == code, (name, guard, out.getvalue())
        said[(name, guard)] = out.getvalue()
    assert "3 replayed, 3 unchanged" in said[("scores", "approximations")]
    assert (
        "guard crossed: approximations (2 replayed approximately: 0 read a rate counter, "
        "2 a score, 0 walked lineage, the logged decision had not)"
        in said[("scores", "approximations")]
    )
    assert (
        "approximations (2 replayed approximately: 2 read a rate counter, 0 a score"
        in (said[("counters", "approximations")])
    )
    assert "guard crossed" not in said[("scores", "any")]
    assert "guard crossed" not in said[("same", "approximations")]
    assert served == sets["same"]


def test_fail_on_approximations_is_the_cli_exit_code(tmp_path: Path) -> None:
    """The same through `memlineage replay` itself (the exit code a CI job reads)."""
    log, _, sets = _approximate_log(tmp_path)
    cli = [sys.executable, "-m", "memlineage", "replay", "--jobs", "1"]
    for name, code in (("same", 0), ("scores", 1), ("counters", 1)):
        done = subprocess.run(
            [*cli, str(log), "--policies", str(sets[name]), "--fail-on", "any,approximations"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == code, (name, done.stdout, done.stderr)


def test_a_revise_replays_with_the_stored_version_as_its_target() -> None:
    """A Revise decides `update` on the proposed version (`memory`) over the stored
    one (`target`), both of one id: the log carries the stored one's facts beside the
    proposed one's, so `target.creator` replays as the user's (an outside audit: the
    unchanged set replayed an agent's denied Revise of the user's statement as allow)."""
    engine, sink, holder = _engine(BUNDLED_POLICIES)
    user = Creator("user", "user:alice")
    engine.record(
        MemoryRecord(
            "city",
            "default",
            subject="user:alice",
            attribute="city",
            value="Paris",
            creator_id="user:alice",
        ),
        user,
    )
    agents = MemoryRecord(
        "city",
        "default",
        subject="user:alice",
        attribute="city",
        value="Rome",
        creator_id="agent:planner",
    )
    denied = engine.revise(agents, 1)
    assert not denied.applied and denied.decision.decision.effect == "deny"
    mine = MemoryRecord(
        "city",
        "default",
        subject="user:alice",
        attribute="city",
        value="Oslo",
        creator_id="user:alice",
    )
    assert engine.revise(mine, 1, user).applied
    report = replay_lines(_lines(sink), holder.current.compiled)
    assert (report.unreadable, report.replayed, report.unchanged) == ([], 3, 3), report
    updates = [json.loads(t)["input"] for _, _, t in _lines(sink)][-2:]
    assert [u["op"] for u in updates] == ["update", "update"]
    assert updates[0]["target_facts"][8] == ["user", "user:alice"]  # the stored creator
    # a line logged before `target_facts` is still read (its target as its id's facts)
    old = json.loads(_lines(sink)[1][2])
    del old["input"]["target_facts"]
    assert replay_lines([("old", 1, json.dumps(old))], holder.current.compiled).replayed == 1


def test_a_reused_decision_replays_at_its_own_time(tmp_path: Path) -> None:
    """A read answered by reuse two minutes after the first is logged with the first
    one's input (its time too): replay decides it at its line's time, so a candidate
    that expires notes after a minute denies it (an outside audit: it replayed as
    unchanged, at the first read's time)."""
    candidate = tmp_path / "candidate"
    shutil.copytree(BUNDLED_POLICIES, candidate)
    (candidate / "expire.mlp").write_text(
        'policy notes_expire priority 90 {\n  on read\n  when "note" in memory.tags and '
        'age(memory) > 1m\n  deny "notes expire after a minute"\n}\n'
    )
    sink, clock = io.StringIO(), ManualClock(T0)
    holder = PolicyHolder(BUNDLED_POLICIES)
    engine = Engine(
        EmbeddedStore(), holder, clock=clock, log=DecisionLog(sink), capture_inputs=True
    )
    alice = Creator("user", "user:alice")
    engine.record(MemoryRecord("n1", "default", tags=("note",), creator_id="user:alice"), alice)
    engine.check("default", "read", ("n1",), alice)
    clock.advance(120)
    engine.check("default", "read", ("n1",), alice)
    assert engine.reused == 1
    last = json.loads(_lines(sink)[-1][2])
    assert last["ts"] == T0 + 120 and last["input"]["time"] == T0  # as first decided
    same = replay_lines(_lines(sink), holder.current.compiled)
    assert (same.replayed, same.unchanged) == (3, 3), same
    report = replay_lines(_lines(sink), PolicyHolder(str(candidate)).current.compiled)
    assert report.transitions == {("allow", "deny"): 1}, report
    assert report.examples[("allow", "deny")] == [last["decision_id"]]


def test_replay_reports_the_obligation_changes_the_shadow_counts(tmp_path: Path) -> None:
    """A candidate that drops `downrank(0.5)` from `unknown_provenance_read` answers
    the same effect with other obligations: the shadow counts each such read as a
    disagreement, and replay reports the same reads as obligations changed, which
    `--fail-on obligations` (and `any`) fails (an outside audit: replay said unchanged
    and exited 0)."""
    candidate = tmp_path / "candidate"
    shutil.copytree(BUNDLED_POLICIES, candidate)
    path = candidate / "unknown_provenance.mlp"
    text = path.read_text()
    assert ", downrank(0.5)" in text
    path.write_text(text.replace(", downrank(0.5)", "", 1))
    log = tmp_path / "decisions.log"
    with log.open("w", encoding="utf-8") as sink:
        holder = PolicyHolder(BUNDLED_POLICIES)
        engine = Engine(EmbeddedStore(), holder, log=DecisionLog(sink), capture_inputs=True)
        engine.shadow_dir = str(candidate)
        assert engine.shadow_load()[0].active
        for i in range(3):
            engine.check("default", "read", (f"legacy-{i}",), Creator("agent", "agent:p"))
        status = engine.shadow.status()
    assert (status.compared, status.disagreed) == (3, 3), status
    served = [json.loads(x) for x in log.read_text().splitlines()]
    report = replay_lines(
        [("log", n, json.dumps(x)) for n, x in enumerate(served, 1)],
        PolicyHolder(str(candidate)).current.compiled,
    )
    assert (report.replayed, report.unchanged, report.transitions) == (3, 0, {}), report
    assert report.obligations == {("degrade", ("downrank(0.5)",), ()): 3}, report
    for guard, code in (("obligations", 1), ("any", 1), ("allow->deny", 0)):
        out = io.StringIO()
        assert replay_command([str(log)], str(candidate), guard, out, 1) == code, out.getvalue()
    assert "3 more with the same effect and other obligations" in out.getvalue()
    assert "degrade obligations -downrank(0.5): 3" in out.getvalue()
