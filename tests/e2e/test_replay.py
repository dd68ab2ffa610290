"""`memlineage replay`: decisions logged by a real sidecar (with their inputs) are
re-decided against a candidate set. The unchanged set reproduces every decision;
a candidate without a deny rule shows its transitions, attributed to that rule, and
a guard on them fails the run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.engine.replay import APPROXIMATIONS, OBLIGATIONS_CHANGED, parse_guards
from memlineage.lineage.clock import ManualClock
from support.memories import T0
from support.sidecar import BUNDLED_POLICIES, RunningSidecar

CLI = [sys.executable, "-m", "memlineage"]


def _decide_things(c: MemLineageClient, clock: ManualClock) -> None:
    """Decisions of every kind the bundled policies take: writes, reads that allow,
    degrade and deny, rate-counted price reads, update and delete checks, acts with
    arguments and a grant."""
    c.record("city", creator="user:alice", claim=("user:alice", "city", "Paris"))
    c.record("guess", creator="reasoning:planner", confidence=0.3)
    c.record("web", creator="tool:web_search")
    c.record("bill", creator="tool:read_file")
    for i in range(3):
        c.record(f"price{i}", creator="tool:flight_api", tags=["flight_price"])
    c.record("plan", creator="agent:planner", dependencies=["web", "city"])
    c.record(
        "tool-guess", creator="tool:web_search", claim=("user:alice", "city", "Rome")
    )  # a write the user's claim protects: denied
    clock.advance(7200)  # prices age past their hour
    for mid in ("city", "guess", "web", "plan", "price0", "price1", "unknown-legacy"):
        c.check("read", mid)
    c.check("update", "city", actor="tool:flight_api")
    c.check("delete", "plan", actor="agent:planner")
    c.check("act", ["plan"], action="book")
    c.grant(["send_money"], memory_id="bill", arguments=["amount"], uses=1)
    c.act("send_money", {"recipient": ["city"], "amount": ["bill"]})
    c.act("send_money", {"recipient": ["web"], "amount": ["bill"]})


def _log(tmp_path: Path, store: str = "embedded") -> tuple[Path, int, int]:
    log = tmp_path / "decisions.log"
    clock = ManualClock(T0)
    config = Config(
        policy_dir=BUNDLED_POLICIES,
        decision_log=str(log),
        decision_log_inputs=True,
        store=store,
    )
    with RunningSidecar(config, clock) as s, MemLineageClient(s.address, timeout=10) as c:
        _decide_things(c, clock)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    with_input = sum(1 for x in lines if "input" in x)
    denies = sum(1 for x in lines if x["effect"] == "deny")
    return log, with_input, denies


def _replay(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMLINEAGE_DECISION_LOG_KEY"}
    return subprocess.run(
        [*CLI, "replay", *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )


@pytest.fixture(params=["embedded", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "redis":
        return str(request.getfixturevalue("redis_server").emptied())
    return "embedded"


def test_the_unchanged_set_reproduces_every_decision(tmp_path: Path, store_url: str) -> None:
    log, with_input, denies = _log(tmp_path, store_url)
    assert with_input >= 20 and denies >= 4
    done = _replay(str(log), "--policies", BUNDLED_POLICIES, "--fail-on", "any")
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert f"{with_input} replayed, {with_input} unchanged, 0 changed (0 more" in first
    assert "approximate" not in done.stdout


def test_a_candidate_without_a_deny_rule_shows_and_guards_its_transitions(
    tmp_path: Path,
) -> None:
    log, _, _ = _log(tmp_path)
    candidate = tmp_path / "candidate"
    shutil.copytree(BUNDLED_POLICIES, candidate)
    src = (candidate / "sources.mlp").read_text()
    start = src.index("policy low_confidence_reasoning")
    end = src.index("}", start) + 1
    # and its test block's expectations of it: a set whose test fails is refused
    src = src[:start] + src[end:]
    src = src.replace("  expect read guess -> deny\n  expect derive guess -> deny\n", "")
    (candidate / "sources.mlp").write_text(src)
    done = _replay(str(log), "--policies", str(candidate), "--fail-on", "deny->allow")
    changed = [x for x in done.stdout.splitlines() if x.startswith("  deny -> ")]
    assert changed, done.stdout
    assert all("low_confidence_reasoning" in x for x in changed), done.stdout
    allowed = [x for x in changed if x.startswith("  deny -> allow")]
    assert (done.returncode == 1) == bool(allowed), done.stdout
    # a guard on a transition that does not happen passes
    quiet = _replay(str(log), "--policies", str(candidate), "--fail-on", "allow->deny")
    assert quiet.returncode == 0, quiet.stdout


def test_lines_without_input_and_bad_input_are_reported(tmp_path: Path) -> None:
    log = tmp_path / "old.log"
    log.write_text(
        json.dumps({"decision_id": "d1", "effect": "allow"})
        + "\n"
        + json.dumps({"decision_id": "d2", "effect": "allow", "input": {"op": "read"}})
        + "\n"
    )
    done = _replay(str(log), "--policies", BUNDLED_POLICIES)
    assert done.returncode == 2
    assert "1 logged without their input" in done.stdout
    assert f"unreadable: {log}:2: KeyError" in done.stdout
    bad = _replay(str(log), "--policies", BUNDLED_POLICIES, "--fail-on", "allow->maybe")
    assert bad.returncode == 2 and "is not EFFECT->EFFECT" in bad.stdout


def test_a_malformed_line_is_unreadable_exit_2_never_a_traceback(tmp_path: Path) -> None:
    """Each damaged line named FILE:LINE with what is wrong, exit 2 (before: a JSON
    array or string line and bytes not UTF-8 gave a traceback and exit 1, which reads
    as a guard crossed; a hand-edited effect or op was replayed as a transition)."""
    log, with_input, _ = _log(tmp_path)
    good = log.read_bytes().splitlines()
    some = json.loads(next(x for x in good if b'"input"' in x))
    bad_op = {**some, "input": {**some["input"], "op": "bogus"}}
    bad_time = {**some, "input": {**some["input"], "time": float("nan")}}
    bad_actor = {**some, "input": {**some["input"], "actor": "nokind"}}
    damaged = {
        b"[1, 2]": "not a decision: a JSON list, not an object",
        b'"text"': "not a decision: a JSON str, not an object",
        b'{"effect": "allow", "x": "\xff\xfe"}'.replace(b"\\xff\\xfe", b"\xff\xfe"): "not UTF-8",
        json.dumps({**some, "effect": "ALLOW"}).encode(): "effect: 'ALLOW' is not one of",
        json.dumps({k: v for k, v in some.items() if k != "effect"}).encode(): "effect: None",
        b"[" * 100_000: "not a decision: JSON nested too deeply",
        json.dumps(bad_op).encode(): "op: 'bogus' is not an operation",
        json.dumps(bad_time).encode(): "time: nan is not a finite time",
        json.dumps(bad_actor).encode(): "actor: 'nokind' is not kind:id",
    }
    for i, (line, problem) in enumerate(damaged.items()):
        edited = tmp_path / f"edited{i}.log"
        edited.write_bytes(b"\n".join([*good[:3], line, *good[3:]]) + b"\n")
        done = _replay(str(edited), "--policies", BUNDLED_POLICIES, "--fail-on", "any")
        assert done.returncode == 2, (problem, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert f"unreadable: {edited}:4: {problem}" in done.stdout, (problem, done.stdout)
        assert f"{with_input} replayed" in done.stdout  # the other lines still are


def test_a_guarded_replay_that_replayed_nothing_is_not_green(tmp_path: Path) -> None:
    log = tmp_path / "bare.log"
    log.write_text(json.dumps({"decision_id": "d1", "effect": "allow"}) + "\n")
    done = _replay(str(log), "--policies", BUNDLED_POLICIES, "--fail-on", "any")
    assert done.returncode == 2
    assert "nothing replayed: no decision in the logs carries its input" in done.stdout
    assert _replay(str(log), "--policies", BUNDLED_POLICIES).returncode == 0  # no guard


def test_reused_decisions_are_logged_with_their_input(tmp_path: Path) -> None:
    """A decision answered by reuse (the engine's table, the Check memo) carries the
    input it was first decided on, so a replay weighs traffic, not fresh decisions
    only (before: 62% of an audit's Check lines had none)."""
    log = tmp_path / "decisions.log"
    config = Config(policy_dir=BUNDLED_POLICIES, decision_log=str(log), decision_log_inputs=True)
    with RunningSidecar(config, ManualClock(T0)) as s, MemLineageClient(s.address, timeout=10) as c:
        c.record("web", creator="tool:web_search")
        for _ in range(6):
            c.check("read", "web")
        assert s.sidecar.engine.reused >= 5
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    reads = [x for x in lines if x["op"] == "read"]
    assert len(reads) == 6 and all("input" in x for x in reads)
    assert len({x["decision_id"] for x in reads}) == 6
    done = _replay(str(log), "--policies", BUNDLED_POLICIES, "--fail-on", "any")
    assert done.returncode == 0 and "7 replayed, 7 unchanged" in done.stdout, done.stdout


def test_guards_parse() -> None:
    assert parse_guards("allow->deny, degrade->deny") == {("allow", "deny"), ("degrade", "deny")}
    assert len(parse_guards("any")) == 7 and OBLIGATIONS_CHANGED in parse_guards("any")
    assert parse_guards("obligations, allow->deny") == {OBLIGATIONS_CHANGED, ("allow", "deny")}
    assert APPROXIMATIONS not in parse_guards("any")  # `any` names the changes
    assert parse_guards("any,approximations") == parse_guards("any") | {APPROXIMATIONS}
    assert parse_guards(" approximations ") == {APPROXIMATIONS}
    for bad in ("allow", "allow->allow", "allow->maybe", "allow->deny,", "->deny"):
        with pytest.raises(ValueError, match="is not EFFECT->EFFECT"):
            parse_guards(bad)


def test_a_parallel_replay_of_small_chunks_reports_what_one_process_does(tmp_path: Path) -> None:
    from memlineage.engine import replay

    log, with_input, _ = _log(tmp_path)
    candidate = tmp_path / "candidate"
    shutil.copytree(BUNDLED_POLICIES, candidate)
    (candidate / "zz.mlp").write_text(
        "policy no_agents priority 99 {\n  on read\n  when memory.creator.kind == agent\n"
        '  deny "no agents"\n}\n'
    )
    tasks = replay.chunks([str(log)], size=2048)
    assert len(tasks) > 3 and tasks[0][3] == 1
    assert sum(end - start for _, start, end, _ in tasks) == log.stat().st_size
    serial = replay.replay_parallel([str(log)], str(candidate), 1)
    old = replay.CHUNK_BYTES
    replay.CHUNK_BYTES = 2048
    try:
        parallel = replay.replay_parallel([str(log)], str(candidate), 2)
    finally:
        replay.CHUNK_BYTES = old
    assert parallel.replayed == serial.replayed == with_input
    assert parallel.transitions == serial.transitions and sum(serial.transitions.values()) >= 1
    assert parallel.by_policy == serial.by_policy


def test_verify_refuses_a_log_with_an_altered_line_and_replays_an_intact_one(
    tmp_path: Path,
) -> None:
    """`replay --verify` checks the chain with `log verify`'s own code and words: one
    allow hand-turned into deny is named FILE:LINE as `log verify` names it, exit 2,
    nothing replayed (before: the edited line was replayed as a transition)."""
    log, with_input, _ = _log(tmp_path)
    lines = log.read_bytes().splitlines(keepends=True)
    n = next(i for i, x in enumerate(lines, 1) if b'"effect":"allow"' in x and b'"input"' in x)
    edited = tmp_path / "edited.log"
    lines[n - 1] = lines[n - 1].replace(b'"effect":"allow"', b'"effect":"deny"', 1)
    edited.write_bytes(b"".join(lines))

    intact = _replay("--verify", str(log), "--policies", BUNDLED_POLICIES, "--fail-on", "any")
    assert intact.returncode == 0, intact.stdout + intact.stderr
    said = intact.stdout.splitlines()
    assert said[0] == f"{len(lines)} decisions, chain intact", said
    assert f"{with_input} replayed, {with_input} unchanged, 0 changed" in said[1]

    done = _replay("--verify", str(edited), "--policies", BUNDLED_POLICIES, "--fail-on", "any")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"{edited}:{n}: altered: the hash does not match"), done.stderr
    assert "replayed" not in done.stdout, done.stdout
    by_verify = subprocess.run(
        [*CLI, "log", "verify", str(edited)], capture_output=True, text=True, timeout=60
    )
    assert (by_verify.returncode, by_verify.stderr) == (1, done.stderr)

    # without --verify the edit is replayed as if the sidecar had denied: a transition
    blind = _replay(str(edited), "--policies", BUNDLED_POLICIES, "--fail-on", "any")
    assert blind.returncode == 1 and "  deny -> allow: 1" in blind.stdout, blind.stdout
    alone = _replay("--key", "k", str(log), "--policies", BUNDLED_POLICIES)
    assert alone.returncode == 2 and "go with --verify" in alone.stderr
