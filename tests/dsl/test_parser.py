"""Parser units: each construct's AST, spans, durations, and error reporting."""

from __future__ import annotations

import pytest
from memlineage_dsl import ast as A
from memlineage_dsl.parser import duration_seconds, parse_expr, parse_source, unquote


def only_item(text: str) -> A.Item:
    module, diags = parse_source(text)
    assert diags == []
    assert len(module.items) == 1
    return module.items[0]


def n(value: float) -> A.Number:
    return A.Number(float(value))


def attr(*path: str) -> A.Expr:
    node: A.Expr = A.Name(path[0])
    for name in path[1:]:
        node = A.Attr(node, name)
    return node


# ---------------------------------------------------------------- expressions
@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("42", n(42)),
        ("0.5", n(0.5)),
        ("1e3", n(1000)),
        ("-5", n(-5)),
        ("-(5)", n(-5)),
        ("- x", A.Unary("-", A.Name("x"))),
        ("90s", A.Duration(90)),
        ('"a\\"b\\\\c\\nd\\te"', A.Str('a"b\\c\nd\te')),
        ("true", A.Bool(True)),
        ("false", A.Bool(False)),
        ("now", A.Now()),
        ("user", A.Name("user")),
        ("memory.creator.kind", attr("memory", "creator", "kind")),
        ("memory.cost", attr("memory", "cost")),
        ("age(memory)", A.Call("age", (A.Name("memory"),))),
        ("f()", A.Call("f", ())),
        ("[1, 2,]", A.ListLit((n(1), n(2)))),
        ("[]", A.ListLit(())),
        (
            "any(a in ancestors(memory) : a.status == revoked)",
            A.Quant(
                "any",
                "a",
                A.Call("ancestors", (A.Name("memory"),)),
                A.Binary("==", attr("a", "status"), A.Name("revoked")),
            ),
        ),
        ("min(a in xs : a.confidence)", A.Quant("min", "a", A.Name("xs"), attr("a", "confidence"))),
        ("not a", A.Unary("not", A.Name("a"))),
        ("a not in b", A.Binary("not in", A.Name("a"), A.Name("b"))),
        (
            'memory.creator.id matches "tool:*"',
            A.Binary("matches", attr("memory", "creator", "id"), A.Str("tool:*")),
        ),
        ("if a then 1 else 2", A.Cond(A.Name("a"), n(1), n(2))),
    ],
)
def test_expression(src: str, expected: A.Expr) -> None:
    assert parse_expr(src) == expected


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("a or b and c", A.Binary("or", A.Name("a"), A.Binary("and", A.Name("b"), A.Name("c")))),
        ("not a and b", A.Binary("and", A.Unary("not", A.Name("a")), A.Name("b"))),
        ("not a == b", A.Unary("not", A.Binary("==", A.Name("a"), A.Name("b")))),
        ("a - b - c", A.Binary("-", A.Binary("-", A.Name("a"), A.Name("b")), A.Name("c"))),
        ("a + b * c", A.Binary("+", A.Name("a"), A.Binary("*", A.Name("b"), A.Name("c")))),
        ("-a * b", A.Binary("*", A.Unary("-", A.Name("a")), A.Name("b"))),
        ("a < b + 1", A.Binary("<", A.Name("a"), A.Binary("+", A.Name("b"), n(1)))),
        ("now - 2h", A.Binary("-", A.Now(), A.Duration(7200))),
    ],
)
def test_precedence_and_associativity(src: str, expected: A.Expr) -> None:
    assert parse_expr(src) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("5m", 300),
        ("1h", 3600),
        ("7d", 604800),
        ("2w", 1209600),
        ("500ms", 0.5),
        ("1.5h", 5400),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds
    assert parse_expr(text) == A.Duration(seconds)


def test_duration_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        duration_seconds("5 parsecs")


def test_unquote() -> None:
    assert unquote('"a\\"b"') == 'a"b'


# ---------------------------------------------------------------- items
def test_top_level_items() -> None:
    module, diags = parse_source(
        'include "base.mlp"\n'
        "resolve cost_aware waive_penalty 0.2\n"
        "const max_age = 7d\n"
        'sources trusted = ["tool:a", "tool:*",]\n'
    )
    assert diags == []
    assert module.items == (
        A.Include("base.mlp"),
        A.Resolve("cost_aware", (A.Option("waive_penalty", n(0.2)),)),
        A.Const("max_age", A.Duration(604800)),
        A.Sources("trusted", ("tool:a", "tool:*")),
    )


def test_policy() -> None:
    policy = only_item(
        "policy fresh priority 10 weight 2 {\n"
        "  on read, derive\n"
        '  when "price" in memory.tags\n'
        '  degrade refresh(memory.creator.id), annotate("stale") "may be stale"\n'
        "  score 0.4\n"
        "  cost 0.02\n"
        "}\n"
    )
    assert policy == A.Policy(
        name="fresh",
        ops=(A.Ident("read"), A.Ident("derive")),
        when=A.Binary("in", A.Str("price"), attr("memory", "tags")),
        effect=A.Effect(
            "degrade",
            (
                A.Obligation("refresh", (attr("memory", "creator", "id"),)),
                A.Obligation("annotate", (A.Str("stale"),)),
            ),
            "may be stale",
        ),
        priority=n(10),
        weight=n(2),
        score=n(0.4),
        cost=n(0.02),
    )
    assert isinstance(policy, A.Policy)
    assert policy.span == A.Span(1, 1, 7, 2)
    assert policy.name_span == A.Span(1, 8, 1, 13)
    assert policy.ops[1].span == A.Span(2, 12, 2, 18)


def test_policy_clauses_in_any_order_and_empty() -> None:
    a = only_item("policy p { deny on read when x }")
    b = only_item("policy p {\n on read\n when x\n deny\n}")
    assert a == b
    assert only_item("policy p {}") == A.Policy("p", (), None, None)


def test_test_block() -> None:
    test = only_item(
        'test "stale" {\n'
        '  given memory m { tags: ["p"], created_at: now - 2h, }\n'
        '  given request { actor: "user:alice" }\n'
        '  given calls "tool:x" = 3 at now - 5m\n'
        '  given calls "tool:y" = 1\n'
        '  expect read m by "user:alice" -> degrade score 0.2 .. 0.5 with refresh("x")'
        ' with annotate("y") without mark_pending()\n'
        "  expect delete [m, k] -> deny score 1\n"
        "}\n"
    )
    assert isinstance(test, A.Test)
    assert test.name == "stale"
    assert test.stmts == (
        A.GivenMemory(
            "m",
            (
                A.Field("tags", A.ListLit((A.Str("p"),))),
                A.Field("created_at", A.Binary("-", A.Now(), A.Duration(7200))),
            ),
        ),
        A.GivenRequest((A.Field("actor", A.Str("user:alice")),)),
        A.GivenCalls("tool:x", n(3), A.Binary("-", A.Now(), A.Duration(300))),
        A.GivenCalls("tool:y", n(1), None),
        A.Expect(
            A.Ident("read"),
            (A.Ident("m"),),
            "user:alice",
            "degrade",
            0.2,
            0.5,
            (A.Obligation("refresh", (A.Str("x"),)), A.Obligation("annotate", (A.Str("y"),))),
            (A.Obligation("mark_pending", ()),),
        ),
        A.Expect(A.Ident("delete"), (A.Ident("m"), A.Ident("k")), None, "deny", 1.0, 1.0),
    )
    assert test.stmts[0].span.line == 2


def test_comments_are_ignored() -> None:
    module, diags = parse_source('# a\nconst a = 1 // b\n// c\nconst s = "# not a comment"  # d\n')
    assert diags == []
    assert module.items == (A.Const("a", n(1)), A.Const("s", A.Str("# not a comment")))


def test_spans_left_out_of_equality() -> None:
    assert parse_expr("a  +\n b") == parse_expr("a + b")
    assert parse_expr("a + b").span != A.NO_SPAN


# ---------------------------------------------------------------- errors
BROKEN = """policy a {
  on read
  whne memory.confidence < 0.5
  deny
}

policy ok {
  on read
  deny
}

policy b {
  on read
  when memory.status = revoked
  deny
}

const c = 'single'

policy d {
  on read
  deny
"""


def test_every_syntax_error_is_reported_with_position_and_hint() -> None:
    module, diags = parse_source(BROKEN, "broken.mlp")
    got = [(d.code, d.span.line, d.span.column, d.message, d.help) for d in diags]
    assert got == [
        ("E001", 3, 3, "unexpected `whne`", "did you mean `when`?"),
        ("E001", 14, 22, "unexpected `=`", "try `==` instead of `=`"),
        ("E002", 18, 11, "unexpected character `'`", "strings use double quotes"),
        ("E003", 22, 7, "unexpected end of file", "is a closing `}` missing?"),
    ]
    assert diags[0].location == "broken.mlp:3:3"
    assert diags[0].snippet == "whne"
    # the good policy between the broken ones still reaches the checker, and so do `a`
    # and `b`, mended as their hints say (`whne` -> `when`, `=` -> `==`) so errors
    # behind them are found too
    assert [i.name for i in module.items if isinstance(i, A.Policy)] == ["a", "ok", "b"]


def test_unterminated_string() -> None:
    _, diags = parse_source('const a = "abc\n')
    assert [(d.code, d.span.line, d.span.column, d.message) for d in diags] == [
        ("E001", 1, 11, "unterminated string")
    ]


def test_duplicate_clause() -> None:
    _, diags = parse_source("policy p {\n  on read\n  deny\n  allow\n}\n")
    assert [(d.code, d.span.line) for d in diags] == [("E303", 4)]
    assert diags[0].help == "a policy has one effect; split it into two policies"


def test_parse_expr_raises_on_error() -> None:
    with pytest.raises(ValueError):
        parse_expr("a ==")


@pytest.mark.parametrize(
    ("text", "digit", "name"),
    [
        ("0.\u09ea", "\u09ea", "BENGALI DIGIT FOUR"),  # looks like an 8, read as 4 before
        ("\u0660.\u0665", "\u0660", "ARABIC-INDIC DIGIT ZERO"),
        ("\uff15m", "\uff15", "FULLWIDTH DIGIT FIVE"),  # was 5 minutes
    ],
)
def test_a_number_is_written_with_the_digits_0_to_9(text: str, digit: str, name: str) -> None:
    """A digit of another script is no digit of the language (before, `\\d` read it,
    and a reviewer saw another number than the one decided on)."""
    src = f'policy p priority 1 {{\n  on read\n  when memory.confidence < {text}\n  deny "x"\n}}\n'
    _, diags = parse_source(src, "p.mlp")
    first = diags[0]
    assert (first.code, first.message) == ("E002", f"unexpected character `{digit}`")
    assert first.help is not None and name in first.help and "0-9" in first.help
    with pytest.raises(ValueError):
        duration_seconds("\uff15m")
