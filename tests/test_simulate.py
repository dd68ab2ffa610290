"""`memlineage simulate`: the script runner on a real engine and embedded store (every
op, relative and absolute times, a bad step's line), the example's output, and the
command as a process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memlineage.simulate import START, Event, ScriptError, iso, render_text, run, span
from support.sidecar import BUNDLED_POLICIES, REPO

EXAMPLE = REPO / "docs" / "examples" / "travel_week.jsonl"
HOUR = 3600.0


def steps(*objs: dict[str, Any]) -> list[str]:
    return [json.dumps(o) for o in objs]


def events(*objs: dict[str, Any]) -> list[Event]:
    return list(run(steps(*objs), BUNDLED_POLICIES))


def decisions(evs: list[Event]) -> list[Event]:
    return [e for e in evs if e.kind == "decision"]


def failure(*lines: str) -> ScriptError:
    with pytest.raises(ScriptError) as caught:
        list(run(list(lines), BUNDLED_POLICIES))
    return caught.value


PRICE = {
    "op": "record",
    "memory_id": "price",
    "creator": "tool:flight_api",
    "tags": ["flight_price"],
}


def test_times_absolute_relative_and_unstated() -> None:
    evs = events(
        {**PRICE, "at": "+1h"},  # the first relative step counts from START
        {"op": "check", "operation": "read", "memory_id": "price", "at": "+1d12h"},
        {"op": "check", "operation": "read", "memory_id": "price"},  # the previous step's time
        {"op": "advance", "at": "2026-03-01T10:30:00+01:00"},
        {"op": "check", "operation": "read", "memory_id": "price", "at": "+90s"},
    )
    assert [e.at for e in evs] == [
        START + HOUR,
        START + 37 * HOUR,
        START + 37 * HOUR,
        1772357400.0,
        1772357490.0,
    ]
    assert iso(1772357490.0) == "2026-03-01T09:31:30Z"
    assert [e.kind for e in evs] == ["decision", "decision", "decision", "clock", "decision"]
    assert span("0.5w") == 3.5 * 86400


def test_an_hour_later_in_script_time_the_price_is_stale() -> None:
    evs = events(
        {**PRICE, "at": "2026-01-05T09:00:00Z"},
        {"op": "check", "operation": "read", "memory_id": "price", "at": "+59m"},
        {"op": "check", "operation": "read", "memory_id": "price", "at": "+2m", "budget": 0.05},
    )
    fresh, stale = decisions(evs)[1:]
    assert (fresh.data["effect"], stale.data["effect"]) == ("allow", "degrade")
    assert stale.data["obligations"] == [
        {"kind": "refresh", "args": ["tool:flight_api"], "policy": "freshest_flight_price"}
    ]
    assert [r["policy"] for r in stale.data["reasons"]] == ["freshest_flight_price"]
    assert stale.data["cost"] == 0.02
    assert render_text(stale)[0] == (
        "2026-01-05T10:01:00Z    3  check read price: DEGRADE  score 0.989  cost 0.02"
    )


def test_record_supersede_cascade_and_status_ops() -> None:
    claim = ["user:alice", "destination_city"]
    evs = events(
        {"op": "record", "memory_id": "city", "creator": "user:alice", "claim": [*claim, "A"]},
        {"op": "record", "memory_id": "hotel", "creator": "agent:p", "dependencies": ["city"]},
        {"op": "record", "memory_id": "city-2", "creator": "user:alice", "claim": [*claim, "B"]},
        {"op": "status", "action": "confirm", "memory_id": "hotel", "at": "+1h"},
        {"op": "status", "action": "revoke", "memory_id": "city-2", "reason": "typo"},
        {"op": "check", "operation": "read", "memory_id": "hotel"},
    )
    changes = [
        (e.line, e.data["memory_id"], e.data["from"], e.data["to"])
        for e in evs
        if e.kind == "status"
    ]
    assert changes == [
        (3, "city", "active", "superseded"),
        (3, "hotel", "active", "pending_verification"),
        (4, "hotel", "pending_verification", "active"),
        (5, "city-2", "active", "revoked"),
    ]
    record = decisions(evs)[2]
    assert record.data["superseded_id"] == "city" and record.data["recorded"] is True
    revoke = decisions(evs)[4]
    assert (revoke.data["action"], revoke.data["applied"]) == ("revoke", True)
    reasons = [e.data["reason"] for e in evs if e.kind == "status"]
    assert reasons[0] == "superseded by city-2" and "typo" in reasons[3]


def test_act_grant_and_feedback_by_line_and_last() -> None:
    evs = events(
        {"op": "record", "memory_id": "fare", "creator": "tool:flight_api"},
        {"op": "act", "action": "book_flight", "args": {"fare": ["fare"]}},
        {"op": "grant", "actions": ["book_flight"], "memory_id": "fare", "arguments": ["fare"]},
        {"op": "act", "action": "book_flight", "args": {"fare": {"sources": ["fare"]}}},
        {"op": "check", "operation": "act", "memory_id": ["fare"], "action": "lookup"},
        {"op": "feedback", "decision": "last", "success": True},
        {"op": "feedback", "decision": 2, "success": False, "note": "why"},
        {"op": "feedback", "memory_ids": ["fare"], "success": True},
    )
    denied, allowed, via_check = (e.data for e in decisions(evs)[1:])
    assert (denied["effect"], allowed["effect"]) == ("deny", "allow")
    assert allowed["grants_used"] == ["grant-3"]
    assert via_check["operation"] == "act" and via_check["effect"] == "allow"
    grant = next(e for e in evs if e.kind == "grant")
    assert grant.data == {
        "grant_id": "grant-3",
        "actions": ["book_flight"],
        "issuer": "user:default",
    }
    feedback = [e.data for e in evs if e.kind == "feedback"]
    assert [(f["success"], f["memory_ids"], f["updated"]) for f in feedback] == [
        (True, ["fare"], 1),
        (False, ["fare"], 1),
        (True, ["fare"], 1),
    ]


def test_sweep_archives_and_refuses_with_reasons() -> None:
    evs = events(
        {"op": "record", "memory_id": "m", "creator": "agent:a"},
        {"op": "feedback", "memory_ids": ["m"], "success": False},
        {"op": "feedback", "memory_ids": ["m"], "success": False},
        {"op": "sweep", "at": "+30m"},  # not yet due (first review after an hour)
        {"op": "sweep", "at": "+8d", "batch": 10},
    )
    sweeps = [e.data for e in evs if e.kind == "sweep"]
    assert sweeps == [
        {"examined": 0, "moved": 0, "refused": 0},
        {"examined": 1, "moved": 1, "refused": 0},
    ]
    status = evs[-1]
    assert (status.kind, status.data["to"], status.line) == ("status", "archived", 5)
    assert status.data["reason"].startswith("sweep: value 0.2")


def test_the_example_prints_what_docs_show() -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    out = [line for e in run(lines, BUNDLED_POLICIES) for line in render_text(e)]
    expected = (REPO / "docs" / "examples" / "travel_week.txt").read_text(encoding="utf-8")
    assert "\n".join(out) + "\n" == expected
    assert "status plan-b: active -> archived" in expected  # the sweep archives


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{nope"], "1: not JSON: Expecting property name enclosed in double quotes (column 2)"),
        (["[1]"], "1: a step is a JSON object"),
        (['{"op": "fly"}'], "1: op must be one of record, check, act, feedback, status, grant"),
        (["# a comment", "", '{"op": "check"}'], "3: check: operation is required"),
        (['{"op": "advance", "colour": 1}'], "1: advance: unknown field(s) colour"),
        (['{"op": "advance", "at": "+2 hours"}'], "1: advance: at: '2 hours' is not a duration"),
        (['{"op": "advance", "at": "2026-01-01T00:00:00"}'], "has no time zone (end it with Z)"),
        (['{"op": "advance", "at": 5}'], "1: advance: at must be a time like"),
        (
            [
                '{"op": "advance", "at": "2026-02-01T00:00:00Z"}',
                '{"op": "advance", "at": "2026-01-31T00:00:00Z"}',
            ],
            "2: advance: at: 2026-01-31T00:00:00Z is before the previous step "
            "(2026-02-01T00:00:00Z)",
        ),
        (
            ['{"op": "record", "memory_id": "a", "creator": "agent:x", "dependencies": ["b"]}'],
            "1: record: dependencies[0]: no memory 'b' in this namespace",
        ),
        (
            ['{"op": "record", "memory_id": "a", "creator": "robot:x"}'],
            "1: record: creator: 'robot:x' is not",
        ),
        (
            ['{"op": "record", "memory_id": 3, "creator": "user:x"}'],
            "1: record: memory_id must be a string",
        ),
        (
            ['{"op": "check", "operation": "peek", "memory_id": "a"}'],
            "operation: unknown operation 'peek'",
        ),
        (
            ['{"op": "feedback", "decision": 9, "success": true}'],
            "1: feedback: decision 9: no decision",
        ),
        (
            ['{"op": "status", "action": "revoke", "memory_id": "x"}'],
            "memory_id: memory 'x' not found",
        ),
        (['{"op": "status", "action": "melt", "memory_id": "x"}'], "action must be one of revoke"),
        (
            ['{"op": "act", "action": "pay", "args": {"to": 5}}'],
            "1: act: args.to: a list of memory ids",
        ),
        (['{"op": "sweep", "batch": 0}'], "1: sweep: batch: must be between 1 and 10000"),
        (  # before: a RecursionError traceback, exit 1
            ['{"op": "advance", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"],
            "1: not JSON a step can be: nested too deeply",
        ),
    ],
)
def test_a_bad_step_names_its_line(lines: list[str], message: str) -> None:
    err = failure(*lines)
    assert f"{err.line}: {err.message}".startswith(message) or message in err.message


# ---------------------------------------------------------------- the command


def simulate(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlineage", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_command_prints_the_example(tmp_path: Path) -> None:
    done = simulate(str(EXAMPLE), cwd=tmp_path)  # the bundled policies, found from anywhere
    assert done.returncode == 0, done.stderr
    assert done.stdout == (REPO / "docs" / "examples" / "travel_week.txt").read_text()
    as_json = simulate(str(EXAMPLE), "--format", "json", "--policies", BUNDLED_POLICIES)
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert as_json.returncode == 0 and rows[0]["at"] == "2026-01-05T09:00:00Z"
    assert {"decision", "status", "sweep", "feedback", "grant"} <= {r["event"] for r in rows}
    archived = [r for r in rows if r["event"] == "status" and r["to"] == "archived"]
    assert [r["memory_id"] for r in archived] == ["plan-b"]


def test_command_errors_are_script_line_message(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text('{"op": "advance", "at": "+1h"}\n{"op": "check", "memory_id": "a"}\n')
    done = simulate(str(script))
    assert done.returncode == 2
    assert done.stderr == f"{script}:2: check: operation is required\n"
    assert "1  clock" in done.stdout  # what ran before the bad step is printed
    missing = simulate(str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2
    none = tmp_path / "none.jsonl"
    assert missing.stderr == f"{none}: cannot read the script: No such file or directory\n"
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'{"op": "advance"}\n\xff\n')
    undecodable = simulate(str(binary))
    assert undecodable.returncode == 2
    assert undecodable.stderr == f"{binary}: cannot read the script: not UTF-8 (byte 18)\n"
    bad_policies = tmp_path / "p"
    bad_policies.mkdir()
    (bad_policies / "x.mlp").write_text("policy {\n")
    broken = simulate(str(script), "--policies", str(bad_policies))
    assert broken.returncode == 1 and "x.mlp:" in broken.stderr
    for result in (done, missing, undecodable, broken):
        assert "Traceback" not in result.stderr
