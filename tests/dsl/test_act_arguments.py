"""The act gate in the language: arguments bound to their sources, origins, user
grants, `actions` lists, the `acts()` counter, their test syntax, the checker's
diagnostics and `fmt`."""

from __future__ import annotations

import math

from memlineage_dsl.codegen import origins_of
from memlineage_dsl.diagnostics import Severity
from memlineage_dsl.facts import (
    Argument,
    Creator,
    DictSnapshot,
    Grant,
    MemoryFacts,
    UnknownMemory,
    covering_grant,
)
from memlineage_dsl.formatter import format_source
from memlineage_dsl.pipeline import build_texts, lint_texts
from memlineage_dsl.testing import run_tests

GATE = """\
actions money_out = ["send_money", "schedule_*"]

policy injected priority 95 {
  on act
  when request.action in money_out and any(a in request.args : not covered(a))
  deny "an argument comes from a source the user did not delegate"
}

policy rate priority 90 {
  on act
  when request.action in money_out and acts(money_out, 1h) >= 3
  deny "at most 3 payments an hour"
}
"""


def _run(text: str) -> list[str]:
    """Failures of the in-language tests of `text` (with GATE), as messages."""
    build = build_texts({"gate.mlp": GATE, "t.mlp": text})
    errors = [d for d in build.diagnostics if d.severity is Severity.ERROR]
    assert not errors, [d.render() for d in errors]
    assert build.compiled is not None and build.env is not None
    return [f.message for r in run_tests(build.compiled, build.env) for f in r.failures]


def test_arguments_grants_and_counters_decide_as_written() -> None:
    failures = _run(
        """
test "gate" {
  given memory prompt { creator: "user:alice" }
  given memory bill { creator: "tool:read_file" }
  given memory plan { creator: "agent:x", depends: [bill, prompt] }
  given grant g { actions: ["send_money"], arguments: ["amount"], memory: bill, by: "user:alice" }
  given grant forged { actions: ["send_money"], source: "tool:*", by: "tool:read_file" }
  expect act send_money(recipient: [prompt], amount: [bill]) -> allow
  expect act send_money(recipient: [bill], amount: [prompt]) -> deny
  expect act send_money(recipient: [prompt] "IBAN1", amount: [plan]) relying [prompt] -> allow
  expect act send_money(recipient: [], amount: [prompt]) -> deny
  expect act read_file(path: [bill]) -> allow
}

test "a grant bound to a value covers that value only" {
  given memory files { creator: "tool:list_files" }
  given grant g { actions: ["send_money"], memory: files, value: "11" }
  expect act send_money(recipient: [files] "11") -> allow
  expect act send_money(recipient: [files] "13") -> deny
  expect act send_money(recipient: [files]) -> deny
}

test "two payments in the hour and an older one" {
  given memory prompt { creator: "user:alice" }
  given acts "schedule_transaction" = 2
  given acts "send_money" = 1 at now - 2h
  given acts "read_file" = 5
  expect act send_money(recipient: [prompt]) -> allow
}

test "three payments in the hour" {
  given memory prompt { creator: "user:alice" }
  given acts "schedule_transaction" = 2
  given acts "send_money" = 1 at now - 30m
  expect act send_money(recipient: [prompt]) -> deny
}
"""
    )
    assert failures == []


def test_a_failing_expectation_is_reported_with_the_missing_grant() -> None:
    failures = _run(
        """
test "wrong on purpose" {
  given memory prompt { creator: "user:alice" }
  given memory inbox { creator: "tool:read_inbox" }
  expect act send_money(recipient: [inbox], amount: [prompt]) -> allow
}
"""
    )
    assert len(failures) == 1
    assert "argument `recipient` comes from tool:read_inbox via memory `inbox`" in failures[0]
    assert "no live user grant lets it fill `recipient` of `send_money`" in failures[0]


def test_origins_are_the_roots_of_the_lineage_and_unknown_dependencies() -> None:
    user = MemoryFacts("u", creator=Creator.parse("user:a"))
    tool = MemoryFacts("t", creator=Creator.parse("tool:x"))
    mid = MemoryFacts("m", creator=Creator.parse("agent:p"), dependencies=("u", "t", "gone"))
    top = MemoryFacts("top", creator=Creator.parse("agent:p"), dependencies=("m",))
    snap = DictSnapshot([user, tool, mid, top])
    found = origins_of(snap, Argument("x", (top, UnknownMemory("legacy"))))
    assert sorted(o.id for o in found) == ["gone", "legacy", "t", "u"]
    assert {o.id for o in found if not o.known} == {"gone", "legacy"}
    assert [o.id for o in origins_of(snap, user)] == ["u"]


def test_a_tool_output_is_an_origin_even_when_it_rests_on_the_users_query() -> None:
    """Only memories built on nothing were origins: a tool result recorded with the
    user's prompt as its dependency (the query it was called with) left the user as
    the only origin, and an injected recipient in it was ALLOWed (an outside audit,
    also by a same-tool Revise that added the dependency)."""
    prompt = MemoryFacts("p", creator=Creator.parse("user:a"))
    inbox = MemoryFacts("i", creator=Creator.parse("tool:read_inbox"), dependencies=("p",))
    note = MemoryFacts("n", creator=Creator.parse("agent:x"), dependencies=("i",))
    snap = DictSnapshot([prompt, inbox, note])
    assert sorted(o.id for o in origins_of(snap, inbox)) == ["i", "p"]
    assert sorted(o.id for o in origins_of(snap, Argument("to", (note,)))) == ["i", "p"]


def test_a_grant_covers_only_when_live_and_issued_by_a_user() -> None:
    bill = MemoryFacts("bill", creator=Creator.parse("tool:read_file"))
    base = Grant("g", Creator.parse("user:a"), ("send_*",), ("amount",), memory_id="bill")
    amount, recipient = Argument("amount", (bill,)), Argument("recipient", (bill,))
    assert base.covers("send_money", amount, bill, 10.0)
    assert not base.covers("send_money", recipient, bill, 10.0)
    assert not base.covers("share_file", amount, bill, 10.0)
    by_tool = Grant("t", Creator.parse("tool:x"), ("*",), source="tool:*")
    assert not by_tool.covers("send_money", amount, bill, 10.0)
    spent = Grant("s", Creator.parse("user:a"), ("*",), source="tool:*", uses=1, used=1)
    expired = Grant("e", Creator.parse("user:a"), ("*",), source="tool:*", expires_at=5.0)
    future = Grant("f", Creator.parse("user:a"), ("*",), source="tool:*", created_at=20.0)
    y = Argument("y", (bill,))
    assert not any(g.covers("x", y, bill, 10.0) for g in (spent, expired, future))
    # of several that cover, a use is taken from the one that expires first
    late = Grant("late", Creator.parse("user:a"), ("*",), source="tool:*")
    soon = Grant("soon", Creator.parse("user:a"), ("*",), source="tool:*", expires_at=100.0)
    assert covering_grant((late, soon), "x", y, bill, 10.0) is soon
    assert math.isinf(late.expires_at)


def test_the_checker_names_what_is_wrong() -> None:
    def codes(text: str) -> list[tuple[str, str]]:
        return [
            (d.code, d.message)
            for d in lint_texts({"gate.mlp": GATE, "t.mlp": text})
            if d.severity is Severity.ERROR
        ]

    bad_pattern = """
policy p {
  on act
  when acts(request.action, 1h) > 1
  deny
}
"""
    assert [c for c, _ in codes(bad_pattern)] == ["E201"]
    bad_origin = """
policy p {
  on act
  when len(origins(request.action)) > 1
  deny
}
"""
    assert [c for c, _ in codes(bad_origin)] == ["E201"]
    bad_test = """
test "t" {
  given memory a { creator: "user:x" }
  given grant g { actions: ["x"], memory: nobody, colour: "red" }
  expect read a(x: [a]) -> allow
  expect act pay(to: [a], to: [ghost]) -> allow
}
"""
    found = codes(bad_test)
    assert ("E501", "test `t` has no memory `nobody`") in found
    assert any(c == "E502" and "colour" in m for c, m in found)
    assert any(c == "E504" and "only `act`" in m for c, m in found)
    assert any(c == "E109" and "`to`" in m for c, m in found)
    assert ("E501", "test `t` has no memory `ghost`") in found


def test_fmt_keeps_the_new_syntax() -> None:
    text = (
        'actions pay = ["send_*"]\n\n'
        'test "t" {\n'
        '  given memory a { creator: "user:x" }\n'
        '  given grant g { actions: ["send_money"], memory: a, uses: 2 }\n'
        '  given acts "send_money" = 1 at now - 1h\n'
        '  expect act send_money(to: [a] "x", amount: []) relying [a] -> allow\n'
        "}\n"
    )
    out, diags = format_source(text, "t.mlp")
    assert not diags and out == text


def test_a_grant_naming_the_value_is_spent_first_and_pins_the_argument() -> None:
    files = MemoryFacts("files", creator=Creator.parse("tool:list_files"))
    user = Creator.parse("user:a")
    loose = Grant("loose", user, ("*",), memory_id="files", expires_at=50.0)
    pinned = Grant("pinned", user, ("*",), memory_id="files", value="11")
    arg = Argument("file_id", (files,), "11")
    # the narrowest delegation first, though the loose one expires sooner
    assert covering_grant((loose, pinned), "delete_file", arg, files, 10.0) is pinned
    other = Argument("file_id", (files,), "13")
    assert covering_grant((loose, pinned), "delete_file", other, files, 10.0) is loose
    failures = _run(
        """
policy confirm priority 50 {
  on act
  when any(a in request.args : granted(a) and not pinned(a))
  degrade require_confirmation("the source chose it")
}

test "pinned" {
  given memory prompt { creator: "user:alice" }
  given memory files { creator: "tool:list_files" }
  given memory page { creator: "tool:get_webpage" }
  given grant by_value { actions: ["share_file"], memory: files, value: "11" }
  given grant by_source { actions: ["share_file"], arguments: ["email"], source: "tool:get*" }
  expect act share_file(file_id: [files] "11", email: [prompt]) -> allow
  expect act share_file(file_id: [files] "11", email: [page]) -> degrade
  expect act share_file(file_id: [prompt], email: [prompt]) -> allow
}
"""
    )
    assert failures == []


def test_an_argument_origin_with_no_lineage_fails_an_argument_rule_closed() -> None:
    """A rule over the act's arguments that cannot read an origin is a run-time error,
    fail-closed, not a rule that does not apply: before, an amount resting on
    [legacy, bill] was ALLOWed (the rule skipped at `legacy`) and on [bill, legacy]
    DENYed, so the agent's order of the sources decided."""
    failures = _run(
        """
policy no_tool_origin priority 96 {
  on act
  when request.action == "pay"
      and any(a in request.args : any(o in origins(a) : o.creator.kind == tool))
  deny "a payment argument originates in tool output"
}

test "either order" {
  given memory prompt { creator: "user:alice" }
  given memory legacy { known: false }
  given memory bill { creator: "tool:read_file" }
  expect act pay(recipient: [prompt], amount: [legacy, bill]) -> deny
  expect act pay(recipient: [prompt], amount: [bill, legacy]) -> deny
  expect act pay(recipient: [prompt], amount: [prompt]) -> allow
}
"""
    )
    assert failures == []


def test_a_given_memory_has_one_status_as_on_the_sidecar() -> None:
    """The sidecar fills `state` with the status; a test does too (before: a test set
    `status: compressed` and read `state` as active, passing where the sidecar
    decided otherwise), and one that sets both apart is refused."""
    failures = _run(
        """
policy compressed priority 50 {
  on read
  when memory.state == compressed
  degrade annotate("compressed into a summary")
}

test "status is the state" {
  given memory m { status: compressed, successor: "summary" }
  given memory n { state: compressed, successor: "summary" }
  expect read m -> degrade
  expect read n -> degrade
}

test "two that disagree" {
  given memory x { status: active, state: archived }
  expect read x -> allow
}
"""
    )
    assert len(failures) == 1 and "its state is its status on the sidecar" in failures[0]


def test_a_rule_failing_under_resolve_priority_is_still_reported() -> None:
    """`resolve priority` overrides the lower rule, failed or not; its failure stays in
    the decision's errors (before: it vanished, so a rule broken for every request was
    invisible in decisions and logs)."""
    from memlineage_dsl.evaluator import decide
    from memlineage_dsl.facts import Request

    text = """
resolve priority

policy trusted_user_allow priority 100 {
  on read
  when memory.creator.kind == user
  allow
}

policy recently_used priority 10 {
  on read
  when since(memory.last_access) < 1d
  degrade annotate("recently used")
}
"""
    build = build_texts({"p.mlp": text})
    assert build.compiled is not None
    m = MemoryFacts("m", creator=Creator.parse("user:alice"))  # never accessed: None
    d = decide(build.compiled, Request("read", m, Creator.parse("user:alice")), DictSnapshot([m]))
    assert d.effect == "allow"
    assert len(d.errors) == 1 and "recently_used" in d.errors[0]
