"""Limits of the language: numbers that reach the wire, and deep or long expressions.

Every attack here used to pass lint and break decisions, or raise out of lint,
fmt, test or build (OverflowError, RecursionError, a misleading "too many nested
parentheses"). Each must now give a positioned diagnostic, or just work.
"""

from __future__ import annotations

import io

import pytest
from memlineage_dsl.commands import lint_command
from memlineage_dsl.commands import test_command as run_test_command
from memlineage_dsl.diagnostics import CODES, has_errors
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts, Request
from memlineage_dsl.fmt_command import fmt_paths
from memlineage_dsl.formatter import format_source
from memlineage_dsl.limits import INT32_MAX, INT32_MIN, MAX_DEPTH
from memlineage_dsl.parser import parse_source
from memlineage_dsl.pipeline import build_texts, lint_texts
from memlineage_dsl.testing import run_tests

TERM = 'memory.id == "b"'


def _policy(when: str, head: str = "") -> str:
    return f'policy p{head} {{ on read when {when} deny "x" }}\n'


def _codes(text: str) -> list[tuple[str, int, int]]:
    return [(d.code, d.span.line, d.span.column) for d in lint_texts({"a.mlp": text})]


# ---------------------------------------------------------------- numbers
@pytest.mark.parametrize("priority", ["2147483648", "-2147483649", "1e10", "1e309"])
def test_a_priority_outside_int32_is_an_error_at_its_place(priority: str) -> None:
    assert _codes(_policy(TERM, f" priority {priority}")) == [("E203", 1, 19)]


@pytest.mark.parametrize("priority", [str(INT32_MAX), str(INT32_MIN), "-5", "0"])
def test_every_int32_priority_builds_and_decides(priority: str) -> None:
    build = build_texts({"a.mlp": _policy("true", f" priority {priority}")})
    assert build.compiled is not None, build.diagnostics
    d = decide(build.compiled, _request(), DictSnapshot([], []))
    assert [r.priority for r in d.reasons] == [int(float(priority))]


def test_a_const_folded_into_a_priority_is_range_checked_at_the_use() -> None:
    text = "const P = 2147483648\n" + _policy(TERM, " priority P")
    assert _codes(text) == [("E203", 2, 19)]
    text = "const P = 2147483647 + 1\n" + _policy(TERM, " priority P")
    assert _codes(text) == [("E203", 2, 19)]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (_policy(TERM, " weight 1e309"), (1, 17)),
        (_policy(TERM, " weight 1e7"), (1, 17)),
        ("policy p { on read deny score 1e309 }", (1, 31)),
        ("policy p { on read degrade cost 1e309 }", (1, 33)),
        ("policy p { on read degrade cost 1e13 }", (1, 33)),
        ("policy p { on read when memory.confidence > 1e309 deny }", (1, 45)),
        ("policy p { on read when age(memory) > " + "9" * 400 + "d deny }", (1, 39)),
        ("resolve cost_aware waive_penalty 1e309", (1, 34)),
        ("const BIG = 1e308 * 10\npolicy p { on read when memory.confidence > BIG deny }", (1, 13)),
        ("policy p { on read degrade downrank(1e309) }", (1, 37)),
        # a counter window past what the sidecar keeps: every decision would fail
        ('policy p { on read when calls("tool:x", 999999999999999999999d) > 1 deny }', (1, 41)),
        ('policy p { on read when acts("send_*", 8d) > 1 deny }', (1, 40)),
        ('policy p { on read when calls("tool:x", 0s) > 1 deny }', (1, 41)),
        # a window through a const is checked where it is used (before: lint clean)
        ('const W = 8d\npolicy p { on read when calls("tool:x", W) > 1 deny }', (2, 41)),
        # a source the sidecar counts no counter of: a glob (before: lint clean and
        # `memlineage test` counted it, the sidecar failed every decision closed), or
        # no id (a space, past 122 characters)
        ('policy p { on read when calls("tool:*", 1h) > 1 deny }', (1, 31)),
        ('policy p { on read when calls("tool:a b", 1h) > 1 deny }', (1, 31)),
        ('const S = "' + "x" * 123 + '"\npolicy p { on read when calls(S, 1h) > 1 deny }', (2, 31)),
    ],
)
def test_an_infinite_or_out_of_range_number_is_an_error(text: str, where: tuple) -> None:
    diags = lint_texts({"a.mlp": text})
    errors = [(d.code, d.span.line, d.span.column) for d in diags if d.severity == "error"]
    assert errors == [("E203", *where)], diags
    assert all(d.help or "must be" in d.message for d in diags)


@pytest.mark.parametrize(
    "stmt",
    [
        'given calls "tool:x" = 1e309',
        'given calls "tool:x" = 1e9',
        'given calls "tool:x" = 2.5',
        "given memory m { version: 1e309 }",
        "expect read m -> allow score 1e309",
    ],
)
def test_test_values_that_cannot_run_are_errors(stmt: str) -> None:
    text = _policy(TERM) + f'test "t" {{\n  given memory m {{}}\n  {stmt}\n}}\n'
    text = text.replace("given memory m {}\n  given memory m", "given memory m")
    diags = lint_texts({"a.mlp": text})
    errors = [d for d in diags if d.severity == "error"]
    assert errors and {d.code for d in errors} <= {"E203", "E504"}, diags
    line = text.splitlines().index(f"  {stmt}") + 1
    assert all(d.span.line == line for d in diags if d.severity == "error")


def test_the_test_runner_reports_a_setup_it_cannot_run() -> None:
    # what lint rejects still never raises out of the runner (the CLI runs it)
    build = build_texts({"a.mlp": _policy(TERM)})
    assert build.compiled is not None and build.env is not None
    text = (
        _policy(TERM) + 'test "t" {\n  given memory m { version: 1e300 }\n'
        '  given calls "x" = 1e9\n  expect read m -> deny\n}\n'
    )
    env = build_texts({"a.mlp": text}).env
    assert env is not None
    (result,) = run_tests(build.compiled, env)
    assert [d.code for d in result.failures] == ["E504"]


# ---------------------------------------------------------------- long chains
def _request(op: str = "read") -> Request:
    m = MemoryFacts(id="b", creator=Creator("user", "user:a"), created_at=0.0)
    return Request(op=op, memory=m, actor=Creator("user", "user:a"), time=100.0)


@pytest.mark.parametrize(("op", "n"), [("and", 600), ("or", 600), ("and", 5000)])
def test_a_long_boolean_chain_lints_formats_builds_and_decides(op: str, n: int) -> None:
    text = _policy(f" {op} ".join([TERM] * n))
    assert lint_texts({"a.mlp": text}) == []
    formatted, diags = format_source(text)
    assert formatted is not None and not diags
    assert parse_source(formatted)[0] == parse_source(text)[0]
    assert format_source(formatted)[0] == formatted
    build = build_texts({"a.mlp": formatted})
    assert build.compiled is not None
    assert decide(build.compiled, _request(), DictSnapshot([], [])).effect == "deny"


def test_a_long_sum_keeps_its_value() -> None:
    text = f"policy p {{ on read degrade score {' + '.join(['0.001'] * 600)} }}\n"
    build = build_texts({"a.mlp": text})
    assert build.compiled is not None, build.diagnostics
    d = decide(build.compiled, _request(), DictSnapshot([], []))
    assert d.compliance_score == pytest.approx(0.6)
    text = _policy("memory.confidence < " + " + ".join(["1"] * 5000))
    assert lint_texts({"a.mlp": text}) == []


# ---------------------------------------------------------------- nesting
def _nested(kind: str, depth: int) -> str:
    """A condition exactly `depth` levels deep."""
    if kind == "not":
        return "not " * (depth - 1) + "true"
    if kind == "any":  # any(a in [true] : ...): the innermost `true` of the list deepest
        return "any(a in [true] : " * (depth - 2) + "true" + ")" * (depth - 2)
    if kind == "minus":  # comparison, then a left-nested chain of `-`
        return "memory.confidence < 1" + " - 1" * (depth - 2)
    if kind == "if":
        return "if " * (depth - 1) + "true" + " then true else false" * (depth - 1)
    raise ValueError(kind)


KINDS = ["not", "any", "minus", "if"]


@pytest.mark.parametrize("kind", KINDS)
def test_nesting_up_to_the_limit_works_everywhere(kind: str) -> None:
    text = _policy(_nested(kind, MAX_DEPTH))
    assert not has_errors(lint_texts({"a.mlp": text}))
    formatted, _ = format_source(text)
    assert formatted is not None and parse_source(formatted)[0] == parse_source(text)[0]
    build = build_texts(
        {"a.mlp": text + 'test "t" {\n  given memory b {}\n  expect read b -> deny\n}\n'}
    )
    assert build.compiled is not None and build.env is not None
    decide(build.compiled, _request(), DictSnapshot([], []))
    assert all(
        r.passed or r.failures[0].code == "E503" for r in run_tests(build.compiled, build.env)
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 300, 600, 3000])
def test_nesting_past_the_limit_is_one_diagnostic(kind: str, depth: int) -> None:
    text = _policy(TERM).replace("p {", "q {") + _policy(_nested(kind, depth))
    diags = lint_texts({"a.mlp": text})
    assert [d.code for d in diags] == ["E007"], diags
    (d,) = diags
    assert d.span.line == 2 and d.help and str(MAX_DEPTH) in d.message
    assert "parenthes" not in d.message
    formatted, fdiags = format_source(text)
    assert formatted is None and [x.code for x in fdiags] == ["E007"]


def test_the_first_level_past_the_limit_is_reported() -> None:
    text = _policy(_nested("not", MAX_DEPTH + 1))
    (d,) = lint_texts({"a.mlp": text})
    # `not` number MAX_DEPTH + 1 is the node one level too deep
    assert d.span.column == len("policy p { on read when ") + 1 + 4 * MAX_DEPTH


def test_consts_inlined_past_the_limit_are_one_diagnostic() -> None:
    lines = ["const C0 = 1"] + [f"const C{i} = C{i - 1} + 1" for i in range(1, 1000)]
    text = "\n".join(lines) + "\n" + _policy("memory.confidence < C999")
    diags = lint_texts({"a.mlp": text})
    assert [d.code for d in diags] == ["E007"], diags[:3]
    assert diags[0].message.startswith("const `C")
    build = build_texts({"a.mlp": text})
    assert build.compiled is None
    short = "\n".join(lines[:10]) + "\n" + _policy("memory.confidence < C9")
    assert not has_errors(lint_texts({"a.mlp": short}))


def test_a_long_chain_of_includes_loads() -> None:
    n = 3000
    files = {f"f{i}.mlp": f'include "f{i + 1}.mlp"\n' for i in range(n)}
    files[f"f{n}.mlp"] = _policy(TERM) + 'include "f0.mlp"\n'
    diags = lint_texts(files)
    assert [d.code for d in diags] == ["E005"]
    files[f"f{n}.mlp"] = _policy(TERM)  # no cycle: a chain of n includes
    assert build_texts(files).compiled is not None


def test_e007_is_a_stable_code() -> None:
    assert CODES["E007"] == "nesting-too-deep"


# ---------------------------------------------------------------- commands
ATTACKS = {
    "priority": _policy(TERM, " priority 2147483648"),
    "inf": _policy(TERM, " priority 1e309"),
    "and": _policy(" and ".join([TERM] * 600)),
    "plus": _policy("memory.confidence < " + " + ".join(["1"] * 600)),
    "any": _policy(_nested("any", 600)),
    "or300": _policy(" or ".join([TERM] * 300)),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_the_commands_answer_every_attack_without_a_traceback(name: str, tmp_path) -> None:
    path = tmp_path / "a.mlp"
    path.write_text(ATTACKS[name], encoding="utf-8")
    out = io.StringIO()
    code = lint_command([str(path)], "human", out)
    assert code in (0, 1) and "Traceback" not in out.getvalue()
    if code == 1:
        assert f"{path}:1:" in out.getvalue()
    assert "nested parentheses" not in out.getvalue()
    assert fmt_paths([str(path)], check=True, diff=False, out=io.StringIO()) in (0, 1, 2)
    assert run_test_command([str(path)], io.StringIO()) == code


# ---------------------------------------------------------------- nested quantifiers
def _layered(layers: int, width: int) -> tuple[DictSnapshot, MemoryFacts]:
    """Each memory rests on every memory of the layer above: the deepest one's
    ancestors are all the others."""
    facts: list[MemoryFacts] = []
    above: tuple[str, ...] = ()
    for layer in range(layers):
        ids = tuple(f"L{layer}_{i}" for i in range(width))
        facts += [MemoryFacts(id=i, dependencies=above) for i in ids]
        above = ids
    return DictSnapshot(facts, []), facts[-1]


NESTED = (
    "any(a in ancestors(memory) : any(b in ancestors(a) : "
    "any(c in ancestors(b) : c.status == revoked)))"
)


@pytest.mark.parametrize(
    "when",
    [
        NESTED,
        "count(a in ancestors(memory) : count(b in lineage(a) : b.confidence < 2) > 0) > 0",
        "any(a in ancestors(memory) : len(ancestors(a)) > 10000)",
    ],
    ids=["nested-any", "nested-count", "walk-per-item"],
)
def test_nested_quantifiers_over_lineage_fail_closed_past_their_budget(when: str) -> None:
    """Nesting multiplies a lineage's size: four nested `ancestors` over 960 memories
    took minutes for one decision and held a sidecar's workers (a shadow candidate
    that passed lint; an outside audit). Past MAX_NESTED_ITEMS the rule fails closed
    for that decision, at once, and a rule beside it still decides."""
    import time

    snap, deep = _layered(14, 40)  # 520 ancestors: 124,800 items walked from them
    build = build_texts(
        {"a.mlp": _policy(when) + 'policy q { on read when memory.confidence < 2 degrade "y" }\n'}
    )
    assert build.compiled is not None, build.diagnostics
    started = time.monotonic()
    d = decide(build.compiled, Request("read", deep, Creator("user", "user:a"), time=1.0), snap)
    assert time.monotonic() - started < 5
    assert d.effect == "deny" and d.errors, d
    assert any("more than 100,000 items in nested quantifiers" in e for e in d.errors), d.errors
    assert [r.policy for r in d.reasons if r.effect == "degrade"] == ["q"]


def test_a_nested_quantifier_within_its_budget_decides_as_before() -> None:
    snap, deep = _layered(4, 10)  # 30 ancestors: 30 x 30 x 30 = 27,000 items
    build = build_texts({"a.mlp": _policy(NESTED.replace("revoked", "active"))})
    assert build.compiled is not None, build.diagnostics
    d = decide(build.compiled, Request("read", deep, Creator("user", "user:a"), time=1.0), snap)
    assert (d.effect, d.errors) == ("deny", ()), d


@pytest.mark.parametrize(
    ("factor", "held"),
    [("memory.confidence * 2", 1.0), ("memory.confidence - 1", 0.0), ("memory.confidence", 0.9)],
)
def test_a_computed_downrank_factor_is_held_to_0_1(factor: str, held: float) -> None:
    """Lint checks a constant factor; a computed one was used as it came: 1.8 ranked a
    degraded memory above allowed ones, -0.5 made its rank negative (an outside
    audit). It is clamped as a computed score is."""
    build = build_texts(
        {"a.mlp": f"policy p {{ on read when memory.confidence < 2 degrade downrank({factor}) }}\n"}
    )
    assert build.compiled is not None, build.diagnostics
    m = MemoryFacts(id="b", creator=Creator("tool", "tool:scraper"), confidence=0.9)
    d = decide(
        build.compiled,
        Request("read", m, Creator("user", "user:a"), time=1.0),
        DictSnapshot([], []),
    )
    assert d.effect == "degrade" and not d.errors, d
    [ob] = d.obligations
    assert (ob.kind, ob.args) == ("downrank", (held,))


@pytest.mark.parametrize(
    ("head", "where"),
    [
        ('resolve cost_aware waive_penalty calls("tool:x", 1h) / 100\n', (1, 34)),
        ("const Z = 0\nresolve cost_aware waive_penalty 1 / Z\n", (2, 34)),
    ],
)
def test_a_resolve_option_that_is_not_a_constant_is_an_error_at_its_place(
    head: str, where: tuple[int, int]
) -> None:
    """Before: lint passed, and the build failed with E601 "policy set failed to
    compile: 'NoneType' object has no attribute 'calls'" (or "float division by
    zero") at 1:1 of whichever file came first (an outside audit)."""
    texts = {"a_rules.mlp": _policy(TERM), "z_resolve.mlp": head}
    diags = lint_texts(texts)
    assert [(d.code, d.span.line, d.span.column) for d in diags] == [("E202", *where)]
    assert diags[0].file == "z_resolve.mlp"
    assert diags[0].message == "`waive_penalty` must be a constant number"


def test_a_walk_inside_a_quantifier_over_a_walk_is_a_warning_at_the_walk() -> None:
    """W406 says where a decision's cost multiplies (each nested walk once), before the
    budget fails the rule closed; a walk per argument of an act is not said."""
    text = _policy(NESTED)
    assert _codes(text) == [("W406", 1, 63), ("W406", 1, 87)]
    assert lint_texts({"a.mlp": _policy(NESTED)})[0].message.startswith(
        "`ancestors(...)` inside a quantifier"
    )
    per_argument = "any(a in request.args : any(o in origins(a) : o.confidence < 0.5))"
    assert _codes("policy p { on act when " + per_argument + ' deny "x" }\n') == []


# ---------------------------------------------------------------- constant arithmetic
@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("const Z = 0\n" + _policy("memory.confidence / Z > 1"), (2, 45)),
        ("const Z = 0\npolicy p { on read deny score 1 / Z }\n", (2, 35)),
        ("const Z = 0\npolicy p { on read degrade downrank(0.5 / Z) }\n", (2, 43)),
        ("const Z = 0\npolicy p { on read degrade cost 1 / (Z * 2) }\n", (2, 38)),
        (_policy("age(memory) / 0s > 1"), (1, 39)),
        ('const Z = 0\npolicy p { on read deny "{1 / Z}" }\n', (2, 31)),
        ("const Q = 1 / 0\n" + _policy("memory.confidence < Q"), (1, 15)),
        (_policy("memory.confidence < min(x in [] : 1)"), (1, 45)),
        # an overflow of constants written in place, not in a const (before: compared
        # with inf, or with NaN: a `deny` that never fired)
        (_policy("memory.confidence < 1e308 * 10"), (1, 45)),
    ],
)
def test_constant_arithmetic_that_cannot_work_is_an_error_at_its_place(
    text: str, where: tuple[int, int]
) -> None:
    """Before: lint passed, and the rule failed closed for every request (a division
    by a zero const, `min` of `[]`): one const broke every decision of the set."""
    build = build_texts({"a.mlp": text})
    errors = [
        (d.code, d.span.line, d.span.column) for d in build.diagnostics if d.severity == "error"
    ]
    assert errors == [("E203", *where)], build.diagnostics
    assert build.compiled is None
    assert all(d.help for d in build.diagnostics if d.code == "E203")


def test_constant_arithmetic_reached_for_some_requests_is_a_warning_and_fails_only_those() -> None:
    text = (
        "const Z = 0\n"
        + _policy("memory.confidence > 0.5 and memory.confidence / Z > 1")
        + 'policy q { on read when memory.confidence < 2 degrade "y" }\n'
    )
    build = build_texts({"a.mlp": text})
    assert build.compiled is not None, build.diagnostics
    assert [
        (d.code, d.span.line, d.span.column) for d in build.diagnostics if d.code != "W403"
    ] == [("W407", 2, 73)]
    hit = MemoryFacts(id="b", creator=Creator("user", "user:a"), confidence=0.9)
    d = decide(
        build.compiled,
        Request("read", hit, Creator("user", "user:a"), time=1.0),
        DictSnapshot([], []),
    )
    assert d.effect == "deny" and len(d.errors) == 1 and "`p`" in d.errors[0], d
    assert [r.policy for r in d.reasons if r.effect == "degrade"] == ["q"]
    miss = MemoryFacts(id="b", creator=Creator("user", "user:a"), confidence=0.1)
    d = decide(
        build.compiled,
        Request("read", miss, Creator("user", "user:a"), time=1.0),
        DictSnapshot([], []),
    )
    assert (d.effect, d.errors) == ("degrade", ()), d


def test_a_quantifier_variable_shadowing_a_zero_const_is_no_division_by_zero() -> None:
    text = "const x = 0\n" + _policy("sum(x in [1, 2] : 1 / x) > 1")
    assert [d.code for d in lint_texts({"a.mlp": text})] == []


# ---------------------------------------------------------------- globs
@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('sources s = ["tool:a",\n  "tool:[z-a]*"]\n' + _policy("memory.creator in s"), (2, 3)),
        ('actions t = ["[9-0]"]\n' + _policy("request.action in t"), (1, 14)),
        (_policy('memory.id matches "tool:[z-a]"'), (1, 43)),
        ('const G = "[z-a]"\n' + _policy('memory.id matches ["x", G]'), (2, 49)),
    ],
)
def test_a_glob_that_can_match_nothing_is_an_error_at_its_place(
    text: str, where: tuple[int, int]
) -> None:
    """Before: lint clean, and the list (or `matches`) never held anything: the rule
    over it never fired, silently."""
    diags = lint_texts({"a.mlp": text})
    assert [(d.code, d.span.line, d.span.column) for d in diags] == [("E203", *where)], diags
    assert "can match nothing" in diags[0].message and diags[0].help


def test_a_glob_from_the_request_is_bounded_and_fails_closed_for_that_request_only() -> None:
    """`x matches memory.value` compiled whatever glob a client sent, into fnmatch's
    cache of 32,768 regexes: long distinct patterns made decisions slow and held memory."""
    import fnmatch
    import time

    text = _policy("memory.id matches memory.value") + (
        'policy q { on read when memory.confidence < 2 degrade "y" }\n'
    )
    build = build_texts({"a.mlp": text})
    assert build.compiled is not None, build.diagnostics

    def decide_value(value: str):  # type: ignore[no-untyped-def]
        m = MemoryFacts(id="b", creator=Creator("user", "user:a"), value=value)
        req = Request("read", m, Creator("user", "user:a"), time=1.0)
        return decide(build.compiled, req, DictSnapshot([], []))

    assert decide_value("b*").effect == "deny"
    before = fnmatch._compile_pattern.cache_info().currsize  # type: ignore[attr-defined]
    started = time.monotonic()
    for i in range(50):
        d = decide_value(f"*{i}" * 30_000)
        assert d.effect == "deny" and len(d.errors) == 1 and "`p`" in d.errors[0], d
        assert [r.policy for r in d.reasons if r.effect == "degrade"] == ["q"]
    assert time.monotonic() - started < 5
    assert fnmatch._compile_pattern.cache_info().currsize == before  # type: ignore[attr-defined]


# ---------------------------------------------------------------- many rules
def test_the_rule_analysis_of_many_rules_is_bounded_and_says_where_it_stopped() -> None:
    """W402/W403 compare rules pairwise: 2,000 rules took 18 s to lint (more than
    quadratic: each pair rebuilt both rules' sets of conditions), and the few MB a
    LintPolicy may carry would have taken days."""
    import time

    def rules(n: int) -> str:
        return "".join(
            f"policy p{i} {{ on read when memory.confidence < 0.{i % 9 + 1} deny }}\n"
            for i in range(n)
        )

    started = time.monotonic()
    diags = lint_texts({"a.mlp": rules(2000)})
    assert time.monotonic() - started < 8
    assert [d.code for d in diags] == ["W408"], diags
    assert diags[0].severity == "warning" and diags[0].help
    assert build_texts({"a.mlp": rules(2000)}).compiled is not None
    assert lint_texts({"a.mlp": rules(200)}) == []
