"""`memlineage simulate` reads a script a person wrote: whatever a step's fields hold
(any JSON value, numbers past float's range too), the step runs or is refused with
its line and the field to blame (`ScriptError`), never another exception."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage.simulate import ScriptError, Simulation
from support.json_values import json_like
from support.sidecar import BUNDLED_POLICIES

FIELDS = [
    *("creator", "actor", "type", "tags", "claim", "volatility", "confidence", "created_at"),
    *("context_id", "dependencies", "operation", "memory_id", "memory_ids", "budget"),
    *("action", "historical", "args", "relies_on", "success", "note", "decision"),
    *("expected_version", "grant_id", "actions", "arguments", "source", "uses"),
    *("expires_at", "value", "digest", "batch", "at", "namespace"),
]
OPS = ("record", "check", "act", "feedback", "status", "grant", "sweep", "advance", "nope")

values = json_like(
    st.sampled_from(["user:alice", "tool:web", "m1", "m2", "+1h", "-2d", "2026-01-01T00:00:00Z"])
    | st.text(max_size=6),
    max_leaves=5,
)


@pytest.fixture(scope="module")
def simulation() -> Iterator[Simulation]:
    sim = Simulation(BUNDLED_POLICIES)
    for n, step in enumerate(
        [
            {"op": "record", "memory_id": "m1", "creator": "user:alice"},
            {"op": "record", "memory_id": "m2", "creator": "tool:web", "dependencies": ["m1"]},
        ],
        start=1,
    ):
        sim.step(n, json.dumps(step))
    yield sim
    sim.close()


# A valid step of each op: the fuzz changes some of its fields, so that it gets past
# the first required one.
TEMPLATES: dict[str, dict[str, object]] = {
    "record": {"memory_id": "m3", "creator": "user:alice", "confidence": 0.9, "tags": ["t"]},
    "check": {"operation": "read", "memory_id": "m1", "budget": 1.0},
    "act": {"action": "send", "args": {"to": ["m1"]}, "relies_on": ["m2"]},
    "feedback": {"memory_ids": ["m1"], "success": True},
    "status": {"memory_id": "m1", "action": "confirm"},
    "grant": {"actions": ["send"], "memory_id": "m2", "uses": 1, "expires_at": "+1h"},
    "sweep": {"batch": 10},
    "advance": {"at": "+1m"},
    "nope": {},
}


@settings(
    max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    op=st.sampled_from(OPS),
    fields=st.dictionaries(st.sampled_from(FIELDS), values, max_size=5),
)
def test_any_step_runs_or_is_refused_with_its_line(
    simulation: Simulation, op: str, fields: dict[str, object]
) -> None:
    text = json.dumps({"op": op, **TEMPLATES[op], **fields})
    try:
        simulation.step(7, text)
    except ScriptError as exc:
        assert exc.line == 7


@pytest.mark.parametrize(
    ("step", "said"),
    [
        (
            {"op": "record", "memory_id": "m9", "creator": "user:a", "confidence": 10**400},
            "confidence",
        ),
        (
            {"op": "record", "memory_id": "m9", "creator": "user:a", "created_at": -(10**400)},
            "created_at",
        ),
        ({"op": "check", "operation": "read", "memory_id": "m1", "budget": 10**400}, "budget"),
        (
            {"op": "grant", "actions": ["send"], "memory_id": "m1", "expires_at": 10**400},
            "expires_at",
        ),
        ({"op": "record", "memory_id": "m9", "creator": None}, "creator is required"),
    ],
)
def test_numbers_past_floats_and_null_required_fields_are_refused(
    simulation: Simulation, step: dict[str, object], said: str
) -> None:
    """Before: OverflowError, and an AssertionError for a null creator (tracebacks)."""
    with pytest.raises(ScriptError) as refused:
        simulation.step(9, json.dumps(step))
    assert refused.value.line == 9 and said in refused.value.message, refused.value
