"""Rule analysis: never fires (W401), shadowed (W402), conflicting (W403), unused (W404)."""

from __future__ import annotations

import pytest
from memlineage_dsl.analysis import analyze
from memlineage_dsl.diagnostics import Diagnostic, Severity
from memlineage_dsl.env import build_env
from memlineage_dsl.loader import load_texts
from memlineage_dsl.pipeline import lint_texts

CONSTS = "const min_conf = 0.8\nconst off = false\nconst window = 1h\n"


def warnings(text: str, code: str | None = None) -> list[Diagnostic]:
    diags = lint_texts({"t.mlp": text})
    assert [d for d in diags if d.severity is Severity.ERROR] == []
    return [d for d in diags if d.code.startswith("W") and (code is None or d.code == code)]


def rule(
    name: str,
    cond: str | None,
    effect: str = "deny",
    ops: str = "read",
    priority: int | None = None,
) -> str:
    head = f"policy {name}" + (f" priority {priority}" if priority is not None else "")
    when = f"  when {cond}\n" if cond else ""
    return f"{head} {{\n  on {ops}\n{when}  {effect}\n}}\n"


def fires(cond: str) -> bool:
    text = CONSTS + rule("p", cond) + 'test "uses" {\n  given calls "x" = 1\n}\n'
    return not [d for d in warnings(text + _use_consts(), "W401") if d.snippet == "p"]


def _use_consts() -> str:
    return rule("use", "memory.confidence > min_conf and off and age(memory) > window", ops="write")


# ---------------------------------------------------------------- W401
NEVER = [
    "memory.confidence > 0.8 and memory.confidence < 0.5",
    "memory.confidence > min_conf and memory.confidence < 0.5",
    "0.8 < memory.confidence and memory.confidence < 0.5",
    "memory.confidence > 0.5 and memory.confidence <= 0.5",
    "memory.confidence >= 0.6 and 0.5 >= memory.confidence",
    "age(memory) > 1h and age(memory) < 30m",
    "age(memory) > window and age(memory) <= 60m",
    "memory.creator.kind == user and memory.creator.kind == tool",
    'memory.creator.kind == "user" and memory.creator.kind == tool',
    "memory.status == revoked and memory.status != revoked",
    "memory.version == 3 and memory.version > 5",
    "false",
    "off",
    "off and memory.confidence > 0.1",
    "memory.confidence > 0.1 and false",
    "1 > 2 and memory.known",
    "unknown(memory) and not unknown(memory)",
    '"x" in memory.tags and not ("x" in memory.tags)',
    "not (memory.confidence <= 0.8) and memory.confidence < 0.5",
    "memory.known == true and memory.known == false",
    "unknown(memory) and memory.confidence < 0.5",
    "not memory.known and age(memory) > 1h",
    "unknown(memory) and any(a in ancestors(memory) : a.known)",
]

SATISFIABLE = [
    "memory.confidence > 0.5 and memory.confidence < 0.8",
    "memory.confidence >= 0.5 and memory.confidence <= 0.5",
    "memory.confidence < 0.5 and memory.confidence < 0.8",
    "memory.confidence > 0.8 or memory.confidence < 0.5",
    "memory.confidence > 0.8 and memory.reliability < 0.5",
    "memory.status != revoked and memory.status != superseded",
    "memory.creator.kind == user and request.actor.kind == tool",
    "memory.version == 3 and memory.version >= 3",
    "age(memory) > 1h and memory.created_at < now - 30m",
    "any(a in ancestors(memory) : a.confidence > 0.8) and "
    "any(a in ancestors(memory) : a.confidence < 0.5)",
    'unknown(memory) and memory.id == "m1"',
    "unknown(memory) or memory.confidence < 0.5",
    "unknown(memory) and request.actor.kind == user",
    "unknown(memory) and (memory.known or memory.confidence < 0.5)",
    "not off",
    "true",
    "memory.confidence > 0.8 and not (memory.confidence < 0.5)",
]


@pytest.mark.parametrize("cond", NEVER)
def test_never_fires(cond: str) -> None:
    assert not fires(cond)


@pytest.mark.parametrize("cond", SATISFIABLE)
def test_satisfiable_rules_are_not_flagged(cond: str) -> None:
    assert fires(cond)


def test_never_fires_is_reported_at_the_policy_name_with_both_conditions() -> None:
    text = rule("impossible", "memory.confidence > 0.8 and memory.confidence < 0.5")
    (d,) = warnings(text)
    assert (d.code, d.snippet, d.span.line) == ("W401", "impossible", 1)
    assert d.message == "policy `impossible` can never fire"
    assert d.help == "`memory.confidence > 0.8` contradicts `memory.confidence < 0.5`"


def test_a_rule_without_when_always_fires() -> None:
    assert warnings(rule("always", None)) == []


# ---------------------------------------------------------------- W402
def test_shadowed_under_priority_strategy() -> None:
    text = (
        "resolve priority\n"
        + rule("high", '"p" in memory.tags', "degrade", "read, derive", 100)
        + rule("low", '"p" in memory.tags and age(memory) > 1d', "deny", "read", 10)
    )
    (d,) = warnings(text)
    assert (d.code, d.snippet) == ("W402", "low")
    assert d.message == "policy `low` is shadowed by `high`"
    assert "`high` (t.mlp:2:8, priority 100)" in (d.help or "")


@pytest.mark.parametrize(
    ("high", "low"),
    [
        # the higher rule does not cover every operation of the lower one
        (
            rule("high", "memory.known", "allow", "read", 100),
            rule("low", "memory.known", "deny", "read, act", 10),
        ),
        # the higher rule is narrower
        (
            rule("high", "memory.known and age(memory) > 1h", "allow", "read", 100),
            rule("low", "memory.known", "deny", "read", 10),
        ),
        # equal priority
        (
            rule("high", "memory.known", "allow", "read", 10),
            rule("low", "memory.known and age(memory) > 1h", "allow", "read", 10),
        ),
        # the would-be shadower never fires
        (
            rule("high", "false", "allow", "read", 100),
            rule("low", "memory.known", "allow", "read", 10),
        ),
        # the would-be shadower has the lower priority
        (
            rule("high", "memory.known", "allow", "read", 1),
            rule("low", "memory.known", "allow", "read", 10),
        ),
    ],
)
def test_not_shadowed_under_priority_strategy(high: str, low: str) -> None:
    shadowed = warnings("resolve priority\n" + high + low, "W402")
    assert [d for d in shadowed if d.snippet == "low"] == []


def test_deny_shadows_under_deny_overrides_whatever_the_priority() -> None:
    text = rule("no_revoked", "memory.status == revoked", "deny", "read, act", 1) + rule(
        "annotate",
        "memory.status == revoked and memory.creator.kind == user",
        'degrade annotate("x")',
        "read",
        50,
    )
    (d,) = warnings(text)
    assert (d.code, d.snippet) == ("W402", "annotate")
    assert "deny overrides" in (d.help or "")


def test_non_deny_does_not_shadow_under_deny_overrides() -> None:
    text = rule("a", "memory.known", "allow", "read", 100) + rule(
        "b", "memory.known and memory.confidence < 0.5", "allow", "read", 1
    )
    assert warnings(text) == []


def test_deny_shadows_under_cost_aware_only_from_higher_priority() -> None:
    lower_deny = rule("d", "memory.known", "deny", "read", 1) + rule(
        "x", "memory.known", "allow", "read", 5
    )
    higher_deny = rule("d", "memory.known", "deny", "read", 9) + rule(
        "x", "memory.known", "allow", "read", 5
    )
    assert warnings("resolve cost_aware\n" + lower_deny, "W402") == []
    assert [d.snippet for d in warnings("resolve cost_aware\n" + higher_deny, "W402")] == ["x"]


def test_consts_are_folded_before_comparing_conditions() -> None:
    text = (
        "resolve priority\nconst lim = 0.5\n"
        + rule("high", "memory.confidence < lim", "deny", "read", 9)
        + rule("low", "memory.known and memory.confidence < 0.5", "allow", "read", 1)
    )
    assert [d.code for d in warnings(text)] == ["W402"]


# ---------------------------------------------------------------- W403
def test_conflict_at_equal_priority_is_warned_once_at_the_later_rule() -> None:
    text = rule("trust", "memory.creator.kind == tool", "allow", "read", 20) + rule(
        "distrust", "memory.confidence < 0.5", "deny", "read, derive", 20
    )
    (d,) = warnings(text)
    assert (d.code, d.snippet, d.span.line) == ("W403", "distrust", 6)
    assert d.message == "policy `distrust` conflicts with `trust` at equal priority"
    assert "`trust` (t.mlp:1:8)" in (d.help or "") and "`read`" in (d.help or "")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            rule("a", "memory.confidence >= 0.5", "allow", "read", 20),
            rule("b", "memory.confidence < 0.5", "deny", "read", 20),
        ),
        (
            rule("a", "memory.known", "allow", "read", 20),
            rule("b", "memory.known", "deny", "read", 21),
        ),
        (
            rule("a", "memory.known", "allow", "read", 20),
            rule("b", "memory.known", "deny", "write", 20),
        ),
        (
            rule("a", "memory.known", "deny", "read", 20),
            rule("b", "memory.known and age(memory) > 1h", "deny", "read", 20),
        ),
        (
            rule("a", "unknown(memory)", "degrade", "read", 20),
            rule("b", "memory.confidence < 0.5", "deny", "read", 20),
        ),
    ],
)
def test_no_conflict(a: str, b: str) -> None:
    assert warnings(a + b, "W403") == []


def test_default_priority_is_zero() -> None:
    text = rule("a", "memory.known", "allow") + rule("b", "memory.confidence < 0.2", "degrade")
    assert [d.code for d in warnings(text)] == ["W403"]


# ---------------------------------------------------------------- W404
def test_unused_const_and_sources() -> None:
    text = (
        "const used = 0.5\nconst unused = 1\nconst in_test = 3\n"
        'sources trusted = ["tool:*"]\nsources spare = ["user:*"]\n'
        + rule("p", "memory.confidence < used and memory.creator.id in trusted")
        + 'test "t" {\n  given calls "tool:x" = in_test\n}\n'
    )
    got = [(d.code, d.snippet, d.message) for d in warnings(text, "W404")]
    assert got == [
        ("W404", "unused", "const `unused` is never used"),
        ("W404", "spare", "source list `spare` is never used"),
    ]


# ---------------------------------------------------------------- direct use
def test_analyze_skips_named_policies() -> None:
    text = rule("impossible", "false")
    env, _ = build_env(load_texts({"t.mlp": text}))
    assert [d.code for d in analyze(env)] == ["W401"]
    assert analyze(env, skip={"impossible"}) == []


def test_policies_with_errors_are_not_analysed() -> None:
    text = rule("broken", "false and memory.confidance > 1")
    diags = lint_texts({"t.mlp": text})
    assert [d.code for d in diags] == ["E102"]
