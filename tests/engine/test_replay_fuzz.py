"""`memlineage replay` reads decision-log lines a person may have edited: whatever a
line's fields hold once edited (any JSON value in any field, the input's too), a
replay reports the line (replayed, or unreadable with its reason) and never raises."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage.engine.core import Engine
from memlineage.engine.decision_log import DecisionLog
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.replay import replay_lines
from memlineage.lineage.model import MemoryRecord
from memlineage.store.embedded import EmbeddedStore
from memlineage_dsl.facts import Creator
from support.json_values import json_like
from support.sidecar import BUNDLED_POLICIES


@pytest.fixture(scope="module")
def logged() -> tuple[list[dict[str, Any]], Any]:
    """Lines a real engine logged with their inputs: reads, a write, an act."""
    sink = io.StringIO()
    holder = PolicyHolder(BUNDLED_POLICIES)
    engine = Engine(
        EmbeddedStore(), holder, log=DecisionLog(sink), reuse_decisions=False, capture_inputs=True
    )
    user, tool = Creator("user", "user:alice"), Creator("tool", "tool:web_search")
    engine.record(MemoryRecord("city", "default", creator_id="user:alice"), user)
    engine.record(MemoryRecord("web", "default", creator_id="tool:web_search"), tool)
    engine.record(
        MemoryRecord("plan", "default", creator_id="agent:p", dependencies=("web", "city")),
        Creator("agent", "agent:p"),
    )
    for mid in ("city", "web", "plan", "nowhere"):
        engine.check("default", "read", (mid,), Creator("agent", "agent:p"))
    engine.check("default", "act", ("plan", "city"), Creator("agent", "agent:p"), action="book")
    lines = [json.loads(x) for x in sink.getvalue().splitlines()]
    assert all("input" in x for x in lines)
    return lines, holder.current.compiled


values = json_like(st.text(max_size=8))


def _paths(v: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, (*at, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, (*at, i))
    return out


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_an_edited_line_is_reported_never_raised(
    logged: tuple[list[dict[str, Any]], Any], data: st.DataObject
) -> None:
    lines, compiled = logged
    line = copy.deepcopy(data.draw(st.sampled_from(lines)))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(line) if p]
        where = data.draw(st.sampled_from(paths))
        parent = line
        for step in where[:-1]:
            parent = parent[step]
        parent[where[-1]] = data.draw(values)
    report = replay_lines([("edited.log", 1, json.dumps(line))], compiled)  # never raises
    assert report.lines == 1
    assert report.replayed + report.without_input + len(report.unreadable) == 1


@pytest.mark.parametrize(
    "score", [10**400, float("nan"), "0.5", True], ids=["past-a-float", "nan", "text", "bool"]
)
def test_a_score_that_is_no_finite_number_is_named(
    logged: tuple[list[dict[str, Any]], Any], score: Any
) -> None:
    """An edited score is unreadable with its field named (an integer past a float's
    range was reported as an OverflowError from deep inside)."""
    lines, compiled = logged
    line = {**lines[0], "score": score}
    report = replay_lines([("edited.log", 1, json.dumps(line))], compiled)
    assert len(report.unreadable) == 1
    assert report.unreadable[0].startswith("edited.log:1: score: "), report.unreadable


@pytest.mark.parametrize(
    "ts", [10**400, float("nan"), "soon", True], ids=["big", "nan", "text", "bool"]
)
def test_a_ts_that_is_no_time_is_named(logged: tuple[list[dict[str, Any]], Any], ts: Any) -> None:
    """A line's `ts` is the time it is replayed at: an edited one is named, not read."""
    lines, compiled = logged
    report = replay_lines([("edited.log", 1, json.dumps({**lines[0], "ts": ts}))], compiled)
    assert len(report.unreadable) == 1
    assert report.unreadable[0].startswith("edited.log:1: ts: "), report.unreadable
