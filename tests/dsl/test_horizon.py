"""Decision horizons: which policies are time-exact, and the instant each tracked
comparison may flip (`memlineage_dsl.horizon`), through compiled policies."""

from __future__ import annotations

import math

import pytest
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import DictSnapshot, MemoryFacts, Request
from memlineage_dsl.horizon import LIN, MARGIN, REL, VAL, crossing, window_change
from memlineage_dsl.pipeline import build_texts

NOW = 1_000_000.0


def _compiled(when: str, extra: str = ""):
    text = f'policy p {{\n  on read\n  when {when}\n  degrade annotate("x") "m"\n{extra}}}\n'
    built = build_texts({"p.mlp": text})
    assert built.ok, [d.message for d in built.diagnostics]
    return built.compiled


@pytest.mark.parametrize("when", [
    "age(memory) > 1h",
    "memory.created_at < now - 1h",  # the moving side on the right
    "since(memory.created_at) >= 30m and memory.type == \"fact\"",
    "request.time - 1h > memory.created_at",
    "memory.reliability < 0.3",
    "min(a in lineage(memory) : a.reliability) < 0.3",
    "max(a in lineage(memory) : age(a)) > 1h",
    "any(a in lineage(memory) : age(a) > 1h)",
    "memory.value_score <= 0.2",
    "calls(\"tool:x\", 1h) >= 10",
    "not (age(memory) > 1h)",
])
def test_time_exact_policies(when: str) -> None:
    assert _compiled(when).plans["read"].reusable


@pytest.mark.parametrize(("when", "extra"), [
    ("age(memory) * 2 > 1h", ""),  # moves at another rate
    ("age(memory) > age(memory)", ""),  # both sides move
    ("1h - age(memory) < 0s", ""),  # falls with time
    ("sum(a in lineage(memory) : age(a)) > 1h", ""),
    ("memory.type == \"fact\"", "  cost age(memory) / 1h\n"),  # a cost that drifts
    ("memory.type == \"fact\"", "  score memory.reliability\n"),
])
def test_policies_that_are_not_time_exact(when: str, extra: str) -> None:
    assert not _compiled(when, extra).plans["read"].reusable


def _horizon(when: str, memory: MemoryFacts, calls=(), half_life: float = 600.0) -> float:
    snap = DictSnapshot([memory], calls=calls)
    snap.half_life_min = half_life
    snap.value_decay = (0.4, math.log(2) / 86400)
    decide(_compiled(when), Request("read", memory, time=NOW), snap)
    return snap.horizon


def test_horizon_of_an_age_test_is_the_crossing() -> None:
    m = MemoryFacts("m", created_at=NOW - 3000.0)
    assert _horizon("age(memory) > 1h", m) == pytest.approx(NOW + 600.0 - MARGIN)
    assert _horizon("memory.created_at < now - 1h", m) == pytest.approx(NOW + 600.0 - MARGIN)
    old = MemoryFacts("m", created_at=NOW - 4000.0)
    assert _horizon("age(memory) > 1h", old) == math.inf  # already past: stays past


def test_horizon_of_a_reliability_test_is_a_lower_bound() -> None:
    m = MemoryFacts("m", reliability=0.6)
    h = _horizon("memory.reliability < 0.3", m)
    assert h == pytest.approx(NOW + 600.0 - MARGIN)  # one half-life halves 0.6 to 0.3
    assert _horizon("memory.reliability < 0.3", MemoryFacts("m", reliability=0.2)) == math.inf
    assert _horizon("memory.reliability < 0.3", m, half_life=math.inf) == math.inf
    assert _horizon("memory.reliability < 0.3", m, half_life=0.0) == NOW  # unknown decay


def test_horizon_of_a_count_is_its_next_change() -> None:
    m = MemoryFacts("m")
    calls = [("tool:x", NOW - 3000.0), ("tool:x", NOW - 100.0), ("tool:x", NOW + 50.0)]
    assert _horizon('calls("tool:x", 1h) >= 2', m, calls[:2]) == NOW + 600.0  # oldest leaves
    assert _horizon('calls("tool:x", 1h) >= 2', m, calls) == NOW + 50.0  # a later one enters


def test_short_circuit_reports_only_what_was_evaluated() -> None:
    m = MemoryFacts("m", type="plan", created_at=NOW - 3000.0)
    assert _horizon('memory.type == "fact" and age(memory) > 1h', m) == math.inf


def test_crossing_and_window_change() -> None:
    assert crossing(LIN, 10.0, 10.0, NOW, 600.0, None) == NOW  # `==` flips at once
    assert crossing(LIN, "a", 1.0, NOW, 600.0, None) == NOW  # not numbers: no reuse
    assert crossing(REL, 0.5, 0.0, NOW, 600.0, None) == math.inf  # never reaches 0
    assert crossing(VAL, 0.5, 0.4, NOW, 600.0, None) == NOW  # dynamics unknown
    lam = math.log(2) / 86400
    h = crossing(VAL, 0.5, 0.4, NOW, 600.0, (0.4, lam))
    assert h == pytest.approx(NOW - math.log1p(-0.25) / lam - MARGIN)
    assert crossing(VAL, 0.9, 0.4, NOW, 600.0, (0.4, lam)) == math.inf  # drop < beta
    assert window_change([], 60.0, NOW) == math.inf
    assert window_change([NOW - 30.0, NOW + 5.0], 60.0, NOW) == NOW + 5.0
    assert window_change([NOW - 30.0], 60.0, NOW) == NOW + 30.0
