"""Messages with values: `deny "{memory.creator.id} is not trusted"`.

Parsed with spans into the string, type-checked like any expression, shown by
type (numbers, durations, times, lists), kept by `fmt`, computed per decision
(part of what the decision cache keys on) and failing closed.
"""

from __future__ import annotations

import pytest
from memlineage_dsl import ast as A
from memlineage_dsl.compiler import CompiledPolicy, CompiledPolicySet
from memlineage_dsl.decision import DENY, ERROR, FIRED, Decision
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts, Request, UnknownMemory
from memlineage_dsl.formatter import format_source
from memlineage_dsl.messages import (
    show_any,
    show_bool,
    show_duration,
    show_id,
    show_list,
    show_number,
    show_time,
)
from memlineage_dsl.parser import parse_source
from memlineage_dsl.pipeline import build_texts, lint_texts

NOW = 1767225600.0  # 2026-01-01T00:00:00Z


def policy(message: str, when: str = "true", ops: str = "read") -> str:
    return f"policy p {{\n  on {ops}\n  when {when}\n  deny {message}\n}}\n"


def effect_of(text: str) -> A.Effect:
    module, diags = parse_source(text)
    assert diags == [], diags
    item = module.items[0]
    assert isinstance(item, A.Policy) and item.effect is not None
    return item.effect


def diags_of(text: str) -> list[tuple[str, str, str]]:
    return [(d.code, d.location, d.message) for d in lint_texts({"m.mlp": text})]


def mem(id: str = "m1", **kw: object) -> MemoryFacts:
    kw.setdefault("creator", Creator("tool", "tool:x"))
    kw.setdefault("created_at", NOW - 5400)
    return MemoryFacts(id=id, **kw)  # type: ignore[arg-type]  # test values


def decide_read(
    text: str, m: MemoryFacts | UnknownMemory, op: str = "read"
) -> tuple[Decision, CompiledPolicySet]:
    build = build_texts({"m.mlp": text})
    assert build.compiled is not None, build.diagnostics
    req = Request(op=op, memory=m, actor=Creator("user", "user:a"), time=NOW)
    snap = DictSnapshot([m] if isinstance(m, MemoryFacts) else [], [], [])
    return decide(build.compiled, req, snap), build.compiled


def rule(ps: CompiledPolicySet) -> CompiledPolicy:
    p = ps.policy("p")
    assert p is not None
    return p


# ---------------------------------------------------------------- parsing
def test_values_are_parsed_with_spans_into_the_string() -> None:
    effect = effect_of(policy('"{memory.creator.id} is not trusted ({memory.confidence})"'))
    assert isinstance(effect.message, A.Message)
    first, text, second, close = effect.message.parts
    assert first == A.Attr(A.Attr(A.Name("memory"), "creator"), "id")
    assert (text, close) == (" is not trusted (", ")")
    assert isinstance(first, A.Attr) and isinstance(second, A.Attr)
    # line 4 is `  deny "{memory...`: the quote at column 8, the value at 10
    assert (first.span.line, first.span.column) == (4, 10)
    assert first.name_span.column == 25
    assert second.span.column == 10 + len("memory.creator.id} is not trusted ({")


def test_doubled_braces_are_text_and_a_message_without_values_stays_a_string() -> None:
    assert effect_of(policy('"a {{literal}} b"')).message == "a {literal} b"
    assert effect_of(policy('"plain"')).message == "plain"
    effect = effect_of(policy('"{{{memory.id}}}"'))
    assert isinstance(effect.message, A.Message)
    assert effect.message.parts == ("{", A.Attr(A.Name("memory"), "id"), "}")


def test_a_string_inside_a_value_is_escaped_and_may_hold_braces() -> None:
    effect = effect_of(policy(r'"tagged: {\"}{\" in memory.tags}"'))
    assert isinstance(effect.message, A.Message)
    assert effect.message.parts[1] == A.Binary("in", A.Str("}{"), A.Attr(A.Name("memory"), "tags"))


@pytest.mark.parametrize(
    ("message", "code", "column", "text"),
    [
        ('"a {memory.id"', "E001", 11, "unclosed `{` in a message"),
        ('"a } b"', "E001", 11, "unmatched `}` in a message"),
        ('"a {  } b"', "E001", 11, "empty `{}` in a message"),
        ('"x {memory.  + }"', "E001", 21, "unexpected `+`"),
        ('"{1 +}"', "E003", 13, "the value in braces ends too soon"),
    ],
)
def test_syntax_errors_point_into_the_string(
    message: str, code: str, column: int, text: str
) -> None:
    assert diags_of(policy(message)) == [(code, f"m.mlp:4:{column}", text)]


def test_type_errors_point_at_the_value_in_the_string() -> None:
    found = diags_of(policy('"{memory.creatd_at} and {age(memory) > 5} and {request}"'))
    assert found == [
        ("E102", "m.mlp:4:17", "unknown attribute `creatd_at` on `memory`"),
        ("E201", "m.mlp:4:33", "cannot compare `duration` with `number`"),
        ("E201", "m.mlp:4:55", "a message cannot show `request`"),
    ]


def test_a_source_list_cannot_be_shown() -> None:
    text = 'sources trusted = ["tool:*"]\n' + policy('"{trusted}"')
    assert [d[0] for d in diags_of(text)] == ["E201"]


def test_a_const_shown_only_in_a_message_is_used() -> None:
    assert diags_of("const LIMIT = 0.7\n" + policy('"below {LIMIT}"')) == []


# ---------------------------------------------------------------- showing
@pytest.mark.parametrize(
    ("value", "text"),
    [(3.0, "3"), (-0.0, "0"), (1 / 3, "0.333333"), (1234567.5, "1.23457e+06"), (0.7, "0.7")],
)
def test_numbers_read_in_six_significant_digits(value: float, text: str) -> None:
    assert show_number(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (0.25, "250ms"),
        (1.5, "1.5s"),
        (300.0, "5m"),
        (5400.0, "1h30m"),
        (97200.0, "1d3h"),
        (90061.0, "1d1h1m1s"),
        (-300.0, "-5m"),
    ],
)
def test_durations_read_in_units(seconds: float, text: str) -> None:
    assert show_duration(seconds) == text


def test_times_lists_bools_and_ids() -> None:
    assert show_time(NOW) == "2026-01-01T00:00:00Z"
    assert show_time(NOW + 0.5) == "2026-01-01T00:00:00.500Z"
    assert show_time(1e300) == "1e+300"  # past any calendar: its number
    assert show_list(show_any, ("a", "b")) == "a, b"
    assert show_list(show_duration, ()) == "(none)"
    assert (show_bool(True), show_bool(False)) == ("true", "false")
    assert show_id(Creator("tool", "tool:x")) == "tool:x"
    with pytest.raises(TypeError):
        show_number(None)


# ---------------------------------------------------------------- evaluation
MIXED = policy(
    '"chain minimum {min(a in lineage(memory) : a.confidence)} is below {LIMIT}; '
    'age {age(memory)}, made {memory.created_at}, tags {memory.tags}, by {memory.creator}"',
    when="memory.confidence < LIMIT",
)


def test_the_computed_message_is_the_reason() -> None:
    d, _ = decide_read("const LIMIT = 0.7\n" + MIXED, mem(confidence=0.123456789, tags=("a", "b")))
    assert d.effect == DENY
    (reason,) = d.reasons
    assert reason.status == FIRED
    assert reason.message == (
        "chain minimum 0.123457 is below 0.7; age 1h30m, made 2025-12-31T22:30:00Z, "
        "tags a, b, by tool:x"
    )


def test_a_message_with_values_makes_the_rule_dynamic_and_keys_the_cache() -> None:
    text = policy('"confidence {memory.confidence}"', when="memory.confidence < 0.9")
    first, ps = decide_read(text, mem(confidence=0.5))
    second, _ = decide_read(text, mem(confidence=0.25))
    assert first.reasons[0].message == "confidence 0.5"
    assert second.reasons[0].message == "confidence 0.25"
    p = rule(ps)
    assert p.message_fn is not None and not p.static
    # the same compiled set, two memories: each decision has its own message
    snap = DictSnapshot([], [], [])
    for c in (0.5, 0.25, 0.5):
        req = Request(op="read", memory=mem(confidence=c), actor=Creator("user", "u:a"), time=NOW)
        assert decide(ps, req, snap).reasons[0].message == f"confidence {c:g}"


def test_plain_and_constant_messages_stay_static() -> None:
    text = "const LIMIT = 0.7\n" + policy('"below {LIMIT} for {1h + 30m}, {{x}}"')
    d, ps = decide_read(text, mem())
    p = rule(ps)
    assert p.static and p.message_fn is None and p.message == "below 0.7 for 1h30m, {x}"
    assert d.reasons[0].message == p.message
    _, ps = decide_read(policy('"plain"'), mem())
    assert rule(ps).static


def test_a_message_that_fails_fails_the_rule_closed() -> None:
    text = policy('"last read {memory.last_access}"', ops="read")
    d, _ = decide_read(text.replace("deny", "degrade"), mem())  # last_access never set
    assert d.effect == DENY and d.reasons[0].status == ERROR
    assert "a time was expected" in d.errors[0]


def test_a_message_reading_lineage_that_is_not_there_fails_closed() -> None:
    """Its rule fired (`unknown(memory)`): the message cannot make it not apply."""
    text = policy('"by {memory.creator.id}"', when="unknown(memory)").replace("deny", "degrade")
    d, _ = decide_read(text, UnknownMemory("legacy"))
    assert d.effect == DENY and d.reasons[0].status == ERROR


def test_a_message_of_moving_values_is_not_time_exact() -> None:
    _, ps = decide_read(policy('"{age(memory)} old"'), mem())
    assert not rule(ps).time_exact and not ps.plans["read"].reusable
    _, ps = decide_read(policy('"{memory.id} old"'), mem())
    assert rule(ps).time_exact


def test_act_messages_show_the_action_and_its_arguments() -> None:
    text = policy('"{request.action} with {request.args}"', ops="act")
    build = build_texts({"m.mlp": text})
    assert build.compiled is not None, build.diagnostics
    from memlineage_dsl.facts import Argument

    m = mem()
    req = Request(
        op="act",
        memory=m,
        actor=Creator("user", "user:a"),
        time=NOW,
        action="send_money",
        memories=(m,),
        args=(Argument("recipient", (m,)), Argument("amount", (m,))),
    )
    d = decide(build.compiled, req, DictSnapshot([m], [], []))
    assert d.reasons[0].message.startswith("send_money with recipient, amount")


# ---------------------------------------------------------------- fmt
def test_fmt_keeps_values_and_braces() -> None:
    text = policy(
        '"chain {  min(a in lineage(memory):a.confidence)} is {{low}}  {\\"x\\"+\\"}\\"}"'
    )
    out, diags = format_source(text)
    assert out is not None, diags
    assert (
        'deny "chain {min(a in lineage(memory) : a.confidence)} is {{low}}  {\\"x\\" + \\"}\\"}"'
        in out
    )
    assert format_source(out)[0] == out
    assert parse_source(out)[0] == parse_source(text)[0]
