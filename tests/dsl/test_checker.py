"""Unit tests of the static checker: names, types, structure and in-language tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from memlineage_dsl.ast import Span
from memlineage_dsl.checker import check
from memlineage_dsl.diagnostics import Diagnostic, Severity
from memlineage_dsl.env import build_env
from memlineage_dsl.loader import load_texts, read_file, read_files
from memlineage_dsl.pipeline import lint_texts

GOLDEN = Path(__file__).parent / "golden"

PRELUDE = """\
const max_age = 1h
const limit = 10
const high = 100
const off = false
sources trusted = ["tool:flight_api", "tool:weather_*"]
"""


def lint_paths(paths: list[str]) -> list[Diagnostic]:
    """What `memlineage lint` does: read the files, lint them (includes read too)."""
    return lint_texts(read_files(paths), read_file)


def lint(text: str) -> list[Diagnostic]:
    return lint_texts({"t.mlp": text})


def errors(text: str) -> list[Diagnostic]:
    return [d for d in lint(text) if d.severity is Severity.ERROR]


def codes(text: str) -> list[str]:
    return [d.code for d in errors(text)]


def when(cond: str) -> str:
    """A policy using `cond` as its condition, on line 8 after the prelude."""
    return PRELUDE + f"\npolicy p {{\n  on read\n  when {cond}\n  deny\n}}\n"


def policy(body: str, header: str = "") -> str:
    return PRELUDE + f"\npolicy p {header}{{\n{body}\n}}\n"


# ---------------------------------------------------------------- types
WELL_TYPED = [
    "age(memory) > 1h",
    "age(memory) > max_age",
    "now - memory.created_at > 1h",
    "memory.created_at < now - 1h",
    "memory.created_at + 1h < now",
    "1h + 30m > age(memory)",
    "age(memory) * 2 > 1h",
    "2 * age(memory) > 1h",
    "age(memory) / 2 > 1h",
    "age(memory) / 1h > 2",
    "memory.confidence * 2 - 1 / 4 >= 0.5",
    "-memory.confidence < 0",
    "memory.creator.kind == user",
    'memory.creator.kind != "tool"',
    'memory.creator == "tool:flight_api"',
    '"flight_price" in memory.tags',
    '"x" not in memory.tags',
    "memory.creator.id in trusted",
    "memory.creator.id not in trusted",
    '"user:" in memory.subject',
    "memory.status in [revoked, superseded]",
    "memory.confidence in [0.1, 0.2]",
    'memory.creator.id matches "tool:*"',
    "memory.creator.id matches trusted",
    "not memory.known and true",
    "memory.known == false or off",
    "(if memory.known then 1h else 2h) > age(memory)",
    "any(a in ancestors(memory) : a.status in [revoked, superseded])",
    "all(a in lineage(memory, 3) : a.confidence > 0.5)",
    "count(d in descendants(memory) : d.known) > 2",
    "min(a in lineage(memory) : a.confidence) < 0.5",
    "max(a in lineage(memory) : a.created_at) < now",
    "sum(a in lineage(memory) : age(a)) > 1d",
    'any(t in memory.tags : t == "x")',
    "any(m in request.memories : m.creator.id in trusted)",
    "len(memory.tags) > 0 and len(memory.subject) > 0",
    'calls("tool:flight_api", 1h) >= limit',
    "request.actor.kind == user and request.time > memory.created_at",
    "unknown(memory) or since(memory.last_access) > 7d",
    'request.budget < 0.05 and request.action == "book" and not request.historical',
    "target.creator.id == request.actor.id",
    "[1, 2] == [3]",
]


@pytest.mark.parametrize("cond", WELL_TYPED)
def test_well_typed_conditions_are_clean(cond: str) -> None:
    assert errors(when(cond)) == []


ILL_TYPED = [
    ("age(memory) > 5", "cannot compare `duration` with `number`"),
    ("memory.created_at > 1h", "cannot compare `time` with `duration`"),
    ('memory.confidence < "0.7"', "cannot compare `number` with `string`"),
    ("memory.creator.kind == 3", "cannot compare `string` with `number`"),
    ("memory.known < true", "cannot order `bool` values with `<`"),
    ("now + now > now", "cannot apply `+` to `time` and `time`"),
    ("memory.confidence + 1h > 0", "cannot apply `+` to `number` and `duration`"),
    ('"a" + 1 == "ab"', "cannot apply `+` to `string` and `number`"),
    ('"a" - "b" == "ab"', "cannot apply `-` to `string` and `string`"),
    ("-age(memory) < 0", "cannot compare `duration` with `number`"),
    ('-memory.subject == "x"', "cannot negate `string`"),
    ("3 in memory.tags", "cannot test `number` in `list<string>`"),
    ("memory.confidence in trusted", "cannot test `number` in `sources`"),
    ('memory.confidence matches "x"', "cannot match `number` against `string`"),
    ("memory.confidence and true", "`and` needs `bool` operands, got `number`"),
    ("not memory.confidence", "`not` needs a `bool`, got `number`"),
    ("memory.confidence + 1", "`when` must be `bool`, got `number`"),
    ("(if memory.confidence then 1 else 2) > 0", "the `if` condition must be `bool`"),
    ('(if memory.known then 1 else "a") == 1', "`if` branches have different types"),
    ('[1, "a"] == [1]', "list items must have one type: `number` and `string`"),
    ("any(a in memory.confidence : true)", "`any` needs a list to range over"),
    ("any(a in ancestors(memory) : a.confidence)", "the body of `any` must be `bool`"),
    ("sum(a in lineage(memory) : a.status) > 1", "the body of `sum` must be a number"),
    ("sum(a in lineage(memory) : a.confidence) > 1h", "cannot compare `number` with `duration`"),
    ("len(memory.confidence) > 0", "`len` needs a list or a string, got `number`"),
    ('calls("tool:x", 10) >= 10', "argument of `calls` must be `duration`, got `number`"),
    ("age(memory.creator) > 1h", "argument of `age` must be `memory`, got `creator`"),
]


@pytest.mark.parametrize(("cond", "message"), ILL_TYPED)
def test_ill_typed_conditions_give_one_type_mismatch(cond: str, message: str) -> None:
    diags = errors(when(cond))
    assert [d.code for d in diags] == ["E201"], diags
    assert message in diags[0].message


def test_duration_vs_number_has_unit_hint_and_exact_span() -> None:
    (d,) = errors(when("age(memory) > 5"))
    assert d.span == Span(9, 8, 9, 23)
    assert d.snippet == "age(memory) > 5"
    assert d.help == "write the number with a unit, e.g. `5m`"


def test_quoted_number_hint() -> None:
    (d,) = errors(when('memory.confidence < "0.7"'))
    assert d.help == "remove the quotes: `0.7`"


def test_const_types_flow_into_conditions() -> None:
    assert codes(when("age(memory) > limit")) == ["E201"]
    assert codes(when("memory.confidence > max_age")) == ["E201"]


def test_no_cascade_from_unknown_names() -> None:
    diags = errors(when("memory.confidance > 1h and agee(memory) > 5 and nope == 3"))
    assert [d.code for d in diags] == ["E102", "E103", "E101"]


# ---------------------------------------------------------------- names
def test_unknown_attribute_underlines_the_name_with_suggestion() -> None:
    (d,) = errors(when("memory.confidance > 0.5"))
    assert d.code == "E102"
    assert d.span == Span(9, 15, 9, 25)
    assert d.snippet == "confidance"
    assert d.help == "did you mean `confidence`?"


@pytest.mark.parametrize(
    ("cond", "code", "hint"),
    [
        ("memory.creator.knd == user", "E102", "did you mean `kind`?"),
        ("request.actor.kid == user", "E102", "did you mean `kind`?"),
        ("request.budgt < 1", "E102", "did you mean `budget`?"),
        ("any(a in ancestors(memory) : a.stauts == revoked)", "E102", "did you mean `status`?"),
        ("memory.tags.size > 1", "E102", None),
        ("agee(memory) > 1h", "E103", "did you mean `age`?"),
        ("lineag(memory) == []", "E103", "did you mean `lineage`?"),
        ("memory.creator.id in trustd", "E104", "did you mean `trusted`?"),
        ("memory.creator.id matches blocked", "E104", None),
        ("memory.confidence < lmit", "E101", "did you mean `limit`?"),
        ("memory.status == revokd", "E101", "did you mean `revoked`?"),
        ("a.status == revoked", "E101", None),
        ("age(memory, 1) > 1h", "E105", None),
        ("ancestors(memory, 1, 2) == []", "E105", None),
        ('calls("tool:x") > 1', "E105", None),
    ],
)
def test_name_errors(cond: str, code: str, hint: str | None) -> None:
    diags = errors(when(cond))
    assert [d.code for d in diags] == [code], diags
    if hint is not None:
        assert diags[0].help == hint


def test_quantifier_variable_is_scoped_to_its_body() -> None:
    cond = "any(a in ancestors(memory) : a.known) and a.known"
    assert codes(when(cond)) == ["E101"]


def test_unknown_function_underlines_only_the_name() -> None:
    (d,) = errors(when("agee(memory) > 1h"))
    assert (d.span.column, d.span.end_column) == (8, 12)


def test_unknown_operation_with_suggestion() -> None:
    diags = errors(policy("  on read, raed\n  deny"))
    assert [(d.code, d.snippet, d.help) for d in diags] == [
        ("E106", "raed", "did you mean `read`?")
    ]


def test_obligations() -> None:
    body = (
        '  on read\n  degrade anotate("x"), refresh(), refresh(3), downrank(0), '
        "downrank(1.5), downrank(1), refresh(memory.creator), mark_pending()"
    )
    assert codes(policy(body)) == ["E107", "E105", "E201", "E203", "E203"]
    (d,) = [d for d in errors(policy(body)) if d.code == "E107"]
    assert d.snippet == "anotate" and d.help == "did you mean `annotate`?"


def test_unknown_resolve_strategy_and_option() -> None:
    diags = errors("resolve priorty waive_penalty 0.5 budget 3\n")
    assert [(d.code, d.snippet, d.help) for d in diags] == [
        ("E108", "priorty", "did you mean `priority`?"),
        ("E110", "budget", "options: `waive_penalty`"),
    ]
    assert codes("resolve cost_aware waive_penalty 2\n") == ["E203"]
    assert codes("resolve cost_aware waive_penalty 1h\n") == ["E201"]


def test_const_cycle_and_unknown_name_in_const() -> None:
    text = "const a = b + 1\nconst b = a * 2\nconst c = d\n"
    diags = errors(text)
    assert [(d.code, d.span.line) for d in diags] == [("E111", 1), ("E101", 3)]
    assert "a -> b -> a" in diags[0].message


def test_consts_may_reference_later_consts() -> None:
    assert errors("const a = b * 2\nconst b = 1h\n" + when("age(memory) > a")) == []


def test_roots_are_not_names_in_tests() -> None:
    text = 'test "t" {\n  given memory m { subject: memory.subject }\n  expect read m -> allow\n}\n'
    (d,) = errors(text)
    assert d.code == "E101" and d.snippet == "memory"


# ---------------------------------------------------------------- structure
def test_missing_on_and_missing_effect_at_policy_name() -> None:
    diags = errors(PRELUDE + "policy no_on {\n  deny\n}\npolicy no_effect {\n  on read\n}\n")
    assert [(d.code, d.snippet) for d in diags] == [("E301", "no_on"), ("E302", "no_effect")]


def test_allow_with_obligations_and_degrade_without_are_fine() -> None:
    text = policy('  on read\n  allow annotate("ok") score 0.8') + (
        "policy q {\n  on read\n  degrade\n}\n"
    )
    assert errors(text) == []


@pytest.mark.parametrize(
    ("header", "code"),
    [
        ("priority 10 ", None),
        ("priority -5 ", None),
        ("priority high ", None),
        ("priority limit * 2 ", None),
        ("priority 1.5 ", "E202"),
        ("priority memory.confidence ", "E202"),
        ('priority "x" ', "E201"),
        ("weight 2 ", None),
        ("weight 0.5 ", None),
        ("weight 0 ", "E203"),
        ("weight -1 ", "E203"),
        ("weight request.budget ", "E202"),
        ("weight 1h ", "E201"),
    ],
)
def test_priority_and_weight(header: str, code: str | None) -> None:
    assert codes(policy("  on read\n  deny", header)) == ([code] if code else [])


@pytest.mark.parametrize(
    ("clause", "code"),
    [
        ("score 0.5", None),
        ("score 1", None),
        ("score memory.confidence * 0.5", None),
        ("score 1.5", "E203"),
        ("score -0.1", "E203"),
        ("score if memory.known then 0.5 else 2", "E203"),
        ('score "high"', "E201"),
        ("score 5m", "E201"),
        ("cost 0.02", None),
        ('cost if calls("tool:x", 1h) >= limit then 1.0 else 0.02', None),
        ("cost -1", "E203"),
        ("cost 1h", "E201"),
    ],
)
def test_score_and_cost(clause: str, code: str | None) -> None:
    assert codes(policy(f"  on read\n  degrade\n  {clause}")) == ([code] if code else [])


def test_when_must_be_bool() -> None:
    (d,) = errors(when("memory.confidence"))
    assert d.code == "E201" and d.message == "`when` must be `bool`, got `number`"


def test_errors_of_every_rule_are_collected_and_sorted() -> None:
    text = when("age(memory) > 5") + (
        "policy q {\n  on raed\n  when memory.confidance > 0.5\n  deny\n}\n"
    )
    diags = errors(text)
    assert [d.code for d in diags] == ["E201", "E106", "E102"]
    assert diags == sorted(diags, key=Diagnostic.sort_key)


# ---------------------------------------------------------------- tests
TEST_OK = """\
policy stale {
  on read
  when age(memory) > 1h
  degrade refresh("tool:flight_api") score 0.4
}

test "ok" {
  given memory m { tags: ["flight_price"], creator: "tool:flight_api", created_at: now - 2h }
  given memory d { creator: "reasoning:planner", depends: [m], status: revoked, known: true }
  given request { actor: "user:alice", budget: 0.05, time: now, historical: false }
  given calls "tool:flight_api" = 10 at now - 5m
  expect read m -> degrade score 0.3 .. 0.5 with refresh("tool:flight_api")
  expect act [m, d] by "agent:planner" -> allow without annotate("x") score 1
}
"""


def test_valid_test_block_is_clean() -> None:
    assert lint(TEST_OK) == []


@pytest.mark.parametrize(
    ("old", "new", "code", "snippet"),
    [
        ("tags:", "tgs:", "E502", "tgs"),
        ("budget: 0.05", 'budget: "cheap"', "E201", '"cheap"'),
        ("budget: 0.05", "budgte: 0.05", "E502", "budgte"),
        ("depends: [m]", "depends: [mm]", "E501", "mm"),
        ("depends: [m]", "depends: m", "E201", "m"),
        ("expect read m ", "expect read n ", "E501", "n"),
        ("[m, d]", "[m, e]", "E501", "e"),
        ("expect read m", "expect raed m", "E106", "raed"),
        ("score 0.3 .. 0.5", "score 0.5 .. 0.3", "E203", "score 0.5 .. 0.3"),
        ("score 1\n", "score 2\n", "E203", "score 2"),
        ("with refresh", "with refrsh", "E107", "refrsh"),
        ('without annotate("x")', "without annotate()", "E105", "annotate()"),
        ('"reasoning:planner"', '"planner"', "E504", '"planner"'),
        ('"user:alice"', '"robot:alice"', "E504", '"robot:alice"'),
        ("at now - 5m", "at 5m", "E201", "5m"),
        ("= 10 at", '= "ten" at', "E201", '"ten"'),
        ("created_at: now - 2h", "created_at: 2h", "E201", "2h"),
    ],
)
def test_test_block_errors(old: str, new: str, code: str, snippet: str) -> None:
    assert old in TEST_OK
    diags = errors(TEST_OK.replace(old, new, 1))
    assert [(d.code, d.snippet) for d in diags] == [(code, snippet)]


def test_undefined_memory_message_and_suggestion() -> None:
    (d,) = errors(TEST_OK.replace("expect read m ", "expect read dd "))
    assert d.message == "test `ok` has no memory `dd`"
    assert d.help == "did you mean `d`?"


def test_unknown_test_field_suggestion() -> None:
    (d,) = errors(TEST_OK.replace("depends:", "dependencies:"))
    assert d.code == "E502" and d.help == "did you mean `depends`?"


# ---------------------------------------------------------------- pipeline
def test_check_takes_an_env() -> None:
    loaded = load_texts({"t.mlp": when("age(memory) > 5")})
    env, env_diags = build_env(loaded)
    assert env_diags == []
    diags = check(env)
    assert [d.code for d in diags if d.severity is Severity.ERROR] == ["E201"]
    assert diags == sorted(diags, key=Diagnostic.sort_key)


def test_lint_includes_load_env_and_check_diagnostics() -> None:
    texts = {
        "a.mlp": 'include "missing.mlp"\nconst x = 1\nconst x = 2\n',
        "b.mlp": when("age(memory) > 5"),
    }
    got = [(d.file, d.code) for d in lint_texts(texts) if d.severity is Severity.ERROR]
    assert got == [("a.mlp", "E004"), ("a.mlp", "E109"), ("b.mlp", "E201")]


def test_lint_paths_on_disk(tmp_path: Path) -> None:
    (tmp_path / "lib.mlp").write_text('sources trusted = ["tool:*"]\n')
    (tmp_path / "main.mlp").write_text(
        'include "lib.mlp"\npolicy p {\n  on read\n  when memory.creator.id in trusted\n'
        "  allow\n}\n"
    )
    assert lint_paths([str(tmp_path / "main.mlp")]) == []
    assert lint_paths([str(tmp_path)]) == []


def test_rich_valid_policy_file_has_no_diagnostics() -> None:
    assert lint_paths([str(GOLDEN / "valid.mlp")]) == []


def test_strings_concatenate_with_plus() -> None:
    diags = lint_texts(
        {
            "p.mlp": "policy p { on read when true degrade "
            'annotate("superseded by " + memory.successor) }\n'
        }
    )
    assert [d for d in diags if d.severity == "error"] == []


def test_a_test_that_expects_nothing_is_warned_and_fails_when_run(tmp_path: Path) -> None:
    """A test with no `expect` passed whatever the policies decided (a green CI that
    tested nothing; an outside audit)."""
    text = 'test "nothing" {\n  given memory m { creator: "user:alice" }\n}\n'
    assert not errors(text)
    [d] = [d for d in lint(text) if d.code == "W405"]
    assert (d.span.line, d.span.column) == (1, 1)
    assert "expects nothing" in d.message
    assert not errors(
        'test "t" {\n  given memory m { creator: "user:alice" }\n  expect read m -> allow\n}\n'
    )


@pytest.mark.parametrize(
    ("definition", "column"),
    [
        ('const user = "agent"', 7),
        ('const target = "x"', 7),
        ("const memory = 5", 7),
        ("const active = 1", 7),
        ('sources tool = ["tool:*"]', 9),
        ('actions read = ["read_*"]', 9),
    ],
)
def test_a_definition_named_as_a_built_in_is_refused_at_its_name(
    definition: str, column: int
) -> None:
    """Before: `const user = "agent"` in one file made another file's
    `memory.creator.kind == user` compare with "agent" (lint clean: a rule for users
    silently became one for agents); `const target = "x"` was typed as the const
    but compiled as the root, so `target == "x"` checked clean and never held."""
    other = 'policy users { on read when memory.creator.kind == user deny "x" }\n'
    diags = lint_texts({"a.mlp": definition + "\n", "b.mlp": other})
    assert [(d.file, d.code, d.span.line, d.span.column) for d in diags][:1] == [
        ("a.mlp", "E109", 1, column)
    ], diags
    assert "built-in" in diags[0].message and diags[0].help
