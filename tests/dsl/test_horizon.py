"""Decision horizons: which policies are time-exact, and the instant each tracked
comparison may flip (`memlineage_dsl.horizon`), through compiled policies."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts, Request
from memlineage_dsl.horizon import LIN, MARGIN, REL, VAL, crossing, window_change
from memlineage_dsl.pipeline import build_texts
from strategies import well_typed_policy_sets

NOW = 1_000_000.0


def _compiled(when: str, extra: str = ""):
    text = f'policy p {{\n  on read\n  when {when}\n  degrade annotate("x") "m"\n{extra}}}\n'
    built = build_texts({"p.mlp": text})
    assert built.ok, [d.message for d in built.diagnostics]
    return built.compiled


@pytest.mark.parametrize(
    "when",
    [
        "age(memory) > 1h",
        "memory.created_at < now - 1h",  # the moving side on the right
        'since(memory.created_at) >= 30m and memory.type == "fact"',
        "request.time - 1h > memory.created_at",
        "memory.reliability < 0.3",
        "min(a in lineage(memory) : a.reliability) < 0.3",
        "max(a in lineage(memory) : age(a)) > 1h",
        "any(a in lineage(memory) : age(a) > 1h)",
        "memory.value_score <= 0.2",
        'calls("tool:x", 1h) >= 10',
        "not (age(memory) > 1h)",
    ],
)
def test_time_exact_policies(when: str) -> None:
    assert _compiled(when).plans["read"].reusable


@pytest.mark.parametrize(
    ("when", "extra"),
    [
        ("age(memory) * 2 > 1h", ""),  # moves at another rate
        ("age(memory) > age(memory)", ""),  # both sides move
        ("1h - age(memory) < 0s", ""),  # falls with time
        ("sum(a in lineage(memory) : age(a)) > 1h", ""),
        ('memory.type == "fact"', "  cost age(memory) / 1h\n"),  # a cost that drifts
        ('memory.type == "fact"', "  score memory.reliability\n"),
    ],
)
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


class _Counting(DictSnapshot):
    notes = 0

    def note(self, kind: str, q: object, c: object, now: float) -> None:
        self.notes += 1
        super().note(kind, q, c, now)


class _Untimed(DictSnapshot):
    timed = False  # takes no notes: the evaluator compares plainly

    def note(self, kind: str, q: object, c: object, now: float) -> None:
        raise AssertionError(f"noted {kind} {q!r} vs {c!r}: the conditions should not tell")


@pytest.mark.parametrize(
    "when",
    [
        "age(memory) > 1h",
        "memory.created_at < now - 1h",
        "memory.reliability < 0.3",
        "min(a in lineage(memory) : a.reliability) < 0.3",
        "any(a in lineage(memory) : age(a) > 1h)",
    ],
)
@pytest.mark.parametrize("age", [3000.0, 4000.0])
def test_a_snapshot_taking_no_notes_gets_the_same_decision_without_them(
    when: str, age: float
) -> None:
    """A snapshot whose decision will not be kept (`timed` false) is not told of each
    time comparison (a call apiece on every fresh decision): the same outcome."""
    m = MemoryFacts("m", created_at=NOW - age, reliability=age / 10_000)
    compiled = _compiled(when)
    timed = _Counting([m])
    want = decide(compiled, Request("read", m, time=NOW), timed)
    assert timed.notes > 0  # a snapshot that takes notes is told
    assert decide(compiled, Request("read", m, time=NOW), _Untimed([m])) == want


def test_short_circuit_reports_only_what_was_evaluated() -> None:
    m = MemoryFacts("m", type="plan", created_at=NOW - 3000.0)
    assert _horizon('memory.type == "fact" and age(memory) > 1h', m) == math.inf


def test_crossing_and_window_change() -> None:
    assert crossing(LIN, 10.0, 10.0, NOW, 600.0, None) == NOW  # `==` flips at once
    assert crossing(LIN, "a", 1.0, NOW, 600.0, None) == NOW  # not numbers: no reuse
    # halving reaches 0.0 when the float underflows (below 2**-1074): 1,073 half-lives
    # from 0.5, the horizon a few before (before: never, so a decision on
    # `reliability <= 0` was kept past the instant it flipped)
    assert crossing(REL, 0.5, 0.0, NOW, 600.0, None) == NOW + 600.0 * 1069 - MARGIN
    assert 0.5 * 0.5**1075 == 0.0 and 0.5 * 0.5**1073 > 0.0
    assert crossing(REL, 0.5, -0.1, NOW, 600.0, None) == math.inf  # never below 0
    for kind in (LIN, REL, VAL):  # NaN compares the same way at every instant
        assert crossing(kind, math.nan, 0.3, NOW, 600.0, (0.4, 1e-5)) == math.inf
        assert crossing(kind, 0.5, math.nan, NOW, 600.0, (0.4, 1e-5)) == math.inf
    assert crossing(LIN, 5.0, math.inf, NOW, 600.0, None) == math.inf
    assert crossing(VAL, 0.5, 0.4, NOW, 600.0, None) == NOW  # dynamics unknown
    lam = math.log(2) / 86400
    h = crossing(VAL, 0.5, 0.4, NOW, 600.0, (0.4, lam))
    assert h == pytest.approx(NOW - math.log1p(-0.25) / lam - MARGIN)
    assert crossing(VAL, 0.9, 0.4, NOW, 600.0, (0.4, lam)) == math.inf  # drop < beta
    assert window_change([], 60.0, NOW) == math.inf
    assert window_change([NOW - 30.0, NOW + 5.0], 60.0, NOW) == NOW + 5.0
    assert window_change([NOW - 30.0], 60.0, NOW) == NOW + 30.0


# -- the property the server relies on: a decision holds until its horizon ----------------
_H_MIN = 600.0  # the shortest half-life the snapshot is told about


def _memories_at(t: float, seeds: list[tuple]) -> list[MemoryFacts]:
    """The memories as a server would present them at time `t`: reliability decays
    from its value at T0 with each memory's own half-life (never shorter than _H_MIN)."""
    out = []
    for i, (age, rel0, half, status, tags, deps) in enumerate(seeds):
        out.append(
            MemoryFacts(
                f"m{i}",
                created_at=T0 - age,
                reliability=rel0 * 0.5 ** ((t - T0) / half),
                status=status,
                tags=tags,
                confidence=0.5,
                dependencies=deps,
                creator=Creator.parse("tool:flight_api" if i % 2 else "user:alice"),
            )
        )
    return out


T0 = 1_800_000_000.0
_seeds = st.lists(
    st.tuples(
        st.floats(-600, 10 * 86400),
        st.floats(0.0, 1.0),
        st.sampled_from([_H_MIN, 3600.0, math.inf]),
        st.sampled_from(["active", "revoked"]),
        st.sampled_from([(), ("flight_price",)]),
        st.just(()),
    ),
    min_size=1,
    max_size=3,
).map(lambda seeds: [(*s[:5], ("m0",) if i and s[1] > 0.5 else ()) for i, s in enumerate(seeds)])


# Time tests with bounds near the generated memories' ages, counts and reliabilities,
# so that the times drawn below do cross them.
_near = st.one_of(
    st.builds(
        lambda op, d: f"age(memory) {op} {d}s",
        st.sampled_from(["<", "<=", ">", ">="]),
        st.integers(0, 3 * 86400),
    ),
    st.builds(
        lambda op, d: f"memory.created_at {op} now - {d}s",
        st.sampled_from(["<", ">="]),
        st.integers(0, 3 * 86400),
    ),
    st.builds(
        lambda op, n: f"memory.reliability {op} {n / 100}",
        st.sampled_from(["<", "<=", ">", ">="]),
        st.integers(0, 100),
    ),
    st.builds(
        lambda op, n: f"min(a in lineage(memory) : a.reliability) {op} {n / 100}",
        st.sampled_from(["<", ">="]),
        st.integers(0, 100),
    ),
    st.builds(
        lambda op, n, w: f'calls("tool:flight_api", {w}m) {op} {n}',
        st.sampled_from(["<", ">="]),
        st.integers(0, 12),
        st.integers(5, 240),
    ),
    st.sampled_from(['"flight_price" in memory.tags', "memory.status == revoked"]),
)
_conditions = st.recursive(
    _near,
    lambda sub: st.one_of(
        st.builds(lambda a, op, b: f"({a}) {op} ({b})", sub, st.sampled_from(["and", "or"]), sub),
        st.builds(lambda a: f"not ({a})", sub),
    ),
    max_leaves=4,
)


@st.composite
def _time_policy_sets(draw) -> str:
    out = []
    for i in range(draw(st.integers(1, 4))):
        effect = draw(st.sampled_from(['deny "no"', 'degrade annotate("x") "stale"']))
        cost = draw(
            st.sampled_from(["", 'cost if calls("tool:flight_api", 1h) >= 3 then 5 else 0.01\n'])
        )
        out.append(
            f"policy p{i} priority {draw(st.integers(0, 9))} {{\n  on read, update\n"
            f"  when {draw(_conditions)}\n  {effect}\n{cost}}}\n"
        )
    return draw(st.sampled_from(["", "resolve cost_aware\n", "resolve priority\n"])) + (
        "".join(out)
    )


_policy_texts = st.one_of(_time_policy_sets(), well_typed_policy_sets())


def _holds_until_its_horizon(
    text: str,
    seeds: list[tuple],
    calls: list[float],
    op: str,
    instants: Callable[[float], list[float]],
) -> None:
    """Decide `op` at T0; at each of `instants(end)` (in [T0, end), end = the horizon)
    the same request must get the same decision."""
    built = build_texts({"gen.mlp": text})
    assert built.compiled is not None, (text, [d.message for d in built.diagnostics])
    compiled = built.compiled
    events = [("tool:flight_api", T0 + c) for c in calls]

    def decided_at(t: float) -> tuple[object, float]:
        memories = _memories_at(t, seeds)
        snap = DictSnapshot(memories, events)
        snap.half_life_min = _H_MIN
        d = decide(compiled, Request(op, memories[-1], time=t), snap)
        return d, snap.horizon

    first, horizon = decided_at(T0)
    if not compiled.plans[op].reusable or first.errors:
        return
    assert horizon >= T0
    if horizon == T0:  # not reusable at all
        return
    end = min(horizon, T0 + 30 * 86400)
    for t in instants(end):
        assert decided_at(t)[0] == first, (t, horizon)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_policy_texts,
    seeds=_seeds,
    calls=st.lists(st.floats(-4 * 3600, 600), max_size=12),
    op=st.sampled_from(["read", "update", "derive"]),
    data=st.data(),
)
def test_a_decision_holds_until_its_horizon(text, seeds, calls, op, data) -> None:
    _holds_until_its_horizon(
        text,
        seeds,
        calls,
        op,
        lambda end: data.draw(st.lists(st.floats(T0, end, exclude_max=True), max_size=5)),
    )


@pytest.mark.parametrize(
    "when",
    [
        "age(memory) < 0.0005s",  # the case hypothesis found about one run in twelve
        "age(memory) <= 0.0001s",
        "memory.created_at > now - 0.0002s",
    ],
)
def test_a_bound_within_the_margin_holds_at_now_only(when: str) -> None:
    """A crossing nearer than MARGIN, less MARGIN, fell before now: a horizon in the
    past. It is the next float after now: the decision holds at now, not a tick later."""
    text = f"policy p0 {{\n  on read\n  when {when}\n  allow\n}}\n"
    seeds = [(0.0, 0.0, 600.0, "active", (), ())]
    _holds_until_its_horizon(text, seeds, [], "read", lambda end: [T0])
    snap = DictSnapshot(_memories_at(T0, seeds))
    compiled = build_texts({"p.mlp": text}).compiled
    assert compiled is not None
    decide(compiled, Request("read", snap.memories["m0"], time=T0), snap)
    assert snap.horizon == math.nextafter(T0, math.inf)


def test_a_crossing_is_never_before_now() -> None:
    after = math.nextafter(NOW, math.inf)
    assert crossing(LIN, 0.0, 0.0005, NOW, 600.0, None) == after
    assert crossing(LIN, 0.0, MARGIN, NOW, 600.0, None) == after  # exactly the margin
    assert crossing(LIN, 0.0, 2 * MARGIN, NOW, 600.0, None) == NOW + 2 * MARGIN - MARGIN
    assert crossing(REL, 0.3000001, 0.3, NOW, 600.0, None) == after
    lam = math.log(2) / 86400
    assert crossing(VAL, 0.4000000001, 0.4, NOW, 600.0, (0.4, lam)) == after
