"""Table-driven decision cases (OPA-style): each JSON file in decision_cases/
holds cases with a note, the policies, memories, call events, one request and
the expected decision. Add a case by adding a JSON object; no code changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memlineage_dsl.decision import Decision
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts, Request, UnknownMemory
from memlineage_dsl.parser import duration_seconds
from memlineage_dsl.pipeline import build_texts

NOW = 1_800_000_000.0
CASES_DIR = Path(__file__).parent / "decision_cases"


def _load_cases() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(CASES_DIR.glob("*.json")):
        for i, case in enumerate(json.loads(path.read_text())):
            out.append((f"{path.stem}[{i}] {case['note']}", case))
    return out


def _memory(spec: dict) -> MemoryFacts | UnknownMemory:
    spec = dict(spec)
    mid = spec.pop("id")
    if spec.pop("known", True) is False:
        return UnknownMemory(mid)
    age = spec.pop("age_seconds", 0)
    if isinstance(age, str):
        age = duration_seconds(age)
    kw = {
        "creator": Creator.parse(spec.pop("creator", "user:test")),
        "created_at": NOW - age,
        "dependencies": tuple(spec.pop("depends", ())),
    }
    if "tags" in spec:
        kw["tags"] = tuple(spec.pop("tags"))
    return MemoryFacts(id=mid, **kw, **spec)


def _request(spec: dict, memories: dict) -> Request:
    relied = tuple(memories[i] for i in spec.get("memories", ()))
    subject = memories[spec["memory"]] if "memory" in spec else relied[0]
    return Request(
        op=spec["op"],
        memory=subject,
        actor=Creator.parse(spec.get("actor", "user:test")),
        budget=float(spec.get("budget", 1.0)),
        time=NOW,
        historical=bool(spec.get("historical", False)),
        target=memories[spec["target"]] if "target" in spec else None,
        memories=relied,
    )


def _check(decision: Decision, expect: dict) -> None:
    assert decision.effect == expect["effect"], decision
    if "score" in expect:
        low, high = expect["score"]
        assert low - 1e-9 <= decision.compliance_score <= high + 1e-9, decision
    if "cost" in expect:
        assert decision.expected_cost == pytest.approx(expect["cost"]), decision
    if "obligations" in expect:
        got = [[o.kind, list(o.args)] for o in decision.obligations]
        assert got == expect["obligations"], decision
    if "reasons" in expect:
        assert [r.policy for r in decision.reasons] == expect["reasons"], decision
    if "statuses" in expect:
        assert [r.status for r in decision.reasons] == expect["statuses"], decision
    if "errors" in expect:
        assert len(decision.errors) == expect["errors"], decision
    assert 0.0 <= decision.compliance_score <= 1.0


@pytest.mark.parametrize(("name", "case"), _load_cases(), ids=[n for n, _ in _load_cases()])
def test_decision_case(name: str, case: dict) -> None:
    build = build_texts({"case.mlp": "\n".join(case["policies"])})
    errors = [d for d in build.diagnostics if d.severity == "error"]
    assert build.compiled is not None, [f"{d.location} {d.message}" for d in errors]
    memories = {m["id"]: _memory(m) for m in case["memories"]}
    events = [(src, NOW + offset) for src, offset, n in case.get("calls", ()) for _ in range(n)]
    snapshot = DictSnapshot([m for m in memories.values() if isinstance(m, MemoryFacts)], events)
    _check(decide(build.compiled, _request(case["request"], memories), snapshot), case["expect"])
