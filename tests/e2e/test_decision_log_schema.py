"""docs/decision-log.schema.json describes every line a real sidecar logs: with and without
inputs (`decision_log_inputs`), grants spent by an act, and tracing's span ids; the
schema refuses any key it does not name (additionalProperties false), and every key it
names shows up in these logs, so it describes what is written, no more and no less. The
chains still verify with the added fields."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from memlineage import cli
from memlineage.client import MemLineageClient
from memlineage.config import Config
from memlineage.v1 import memlineage_pb2 as pb
from support.sidecar import BUNDLED_POLICIES, REPO, RunningSidecar

SCHEMA = json.loads((REPO / "docs" / "decision-log.schema.json").read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA, format_checker=FormatChecker())


def traffic(c: MemLineageClient) -> None:
    """Every kind of decision: writes, a derive, reads, a ranking, a status change, a
    Revise (its input with the stored version beside the proposed one), and acts with
    and without a grant spent."""
    c.record("prompt", creator="user:alice")
    c.record("bill", creator="tool:read_file", type="tool_result")
    c.record("plan", creator="agent:planner", dependencies=["prompt"])
    c.record("guess", creator="reasoning:planner", confidence=0.4)
    c.check("read", "plan")
    assert c.revise(
        "guess", expected_version=1, creator="reasoning:planner", confidence=0.5
    ).applied
    c.filter_rank([("plan", 0.9), ("guess", 0.8), ("bill", 0.5)])
    c.grant(["send_money"], memory_id="bill", arguments=["amount"], uses=1, actor="user:alice")
    paid = c.act("send_money", {"recipient": ["prompt"], "amount": ["bill"]})
    assert paid.effect == pb.EFFECT_ALLOW and paid.grants_used
    assert not c.act("send_money", {"recipient": ["prompt"], "amount": ["bill"]}).grants_used
    c.revoke("prompt", reason="wrong")
    c.check("read", "plan")


def logged(tmp_path: Path, name: str, **settings: Any) -> list[dict[str, Any]]:
    log = tmp_path / f"{name}.log"
    config = replace(Config(policy_dir=BUNDLED_POLICIES, decision_log=str(log)), **settings)
    with RunningSidecar(config) as s, MemLineageClient(s.address, timeout=10) as c:
        traffic(c)
    assert cli.main(["log", "verify", str(log)]) == 0  # the chain holds with the new fields
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def with_gap(tmp_path: Path) -> list[dict[str, Any]]:
    """A log whose last lines were cut while its sidecar was down: the next sidecar's
    first line is a `gap` line (before, that line failed this schema: an outside audit)."""
    log = tmp_path / "gap.log"
    config = Config(policy_dir=BUNDLED_POLICIES, decision_log=str(log))
    with RunningSidecar(config) as s, MemLineageClient(s.address, timeout=10) as c:
        traffic(c)
    kept = log.read_text(encoding="utf-8").splitlines(keepends=True)[:-2]
    log.write_text("".join(kept), encoding="utf-8")
    with RunningSidecar(config) as s, MemLineageClient(s.address, timeout=10) as c:
        c.check("read", "plan")
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [e.get("event") for e in lines].count("gap") == 1
    return lines


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("schema")
    return {
        "gap": with_gap(tmp),
        "plain": logged(tmp, "plain"),
        "inputs": logged(tmp, "inputs", decision_log_inputs=True, sidecar_id="sc-inputs"),
        "traced": logged(
            tmp, "traced", decision_log_inputs=True, tracing=f"file:{tmp / 'spans.jsonl'}"
        ),
    }


def test_the_schema_is_valid_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("kind", ["plain", "inputs", "traced", "gap"])
def test_every_line_of_a_real_log_fits_the_schema(
    logs: dict[str, list[dict[str, Any]]], kind: str
) -> None:
    lines = logs[kind]
    assert len(lines) >= 12
    for number, line in enumerate(lines, 1):
        errors = [e.message for e in VALIDATOR.iter_errors(line)]
        assert not errors, f"{kind} line {number}: {errors}"
    if kind == "gap":
        return
    # Inputs where captured (a status change decides without reading lineage facts).
    assert any("input" in e for e in lines) == (kind != "plain")
    assert all(("trace_id" in e) == (kind == "traced") for e in lines)
    assert any("grants_used" in e for e in lines)
    assert all(e["labels"]["version"] for e in lines)
    for e in lines:  # `time` is `ts` (the format is checked by the schema's pattern)
        assert dt.datetime.fromisoformat(e["time"]).timestamp() == pytest.approx(e["ts"])


def test_the_schema_names_only_what_is_written(logs: dict[str, list[dict[str, Any]]]) -> None:
    seen = {k for lines in logs.values() for e in lines for k in e}
    assert seen == set(SCHEMA["properties"])
    inputs = {k for e in logs["inputs"] for k in e.get("input", ())}
    assert inputs == set(SCHEMA["$defs"]["input"]["properties"])
    assert {e["labels"]["id"] for e in logs["inputs"]} == {"sc-inputs"}
    # In the order the schema lists them (seq first, prev and hash last).
    order = list(SCHEMA["properties"])
    for e in logs["traced"]:
        assert list(e) == sorted(e, key=order.index)


def test_a_key_the_schema_does_not_name_is_refused(logs: dict[str, list[dict[str, Any]]]) -> None:
    line = dict(logs["plain"][0])
    assert VALIDATOR.is_valid(line)
    assert not VALIDATOR.is_valid({**line, "extra": 1})
    assert not VALIDATOR.is_valid({**line, "time": "2026-01-01 00:00:00"})
    assert not VALIDATOR.is_valid({**line, "effect": "maybe"})
    gap = next(e for e in logs["gap"] if e.get("event") == "gap")
    assert not VALIDATOR.is_valid({**gap, "event": "note"})
    assert not VALIDATOR.is_valid({**line, "event": "gap", "problem": "x"})  # not both
