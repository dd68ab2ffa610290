"""Fuzz `parse_source`: whatever the text, it returns diagnostics and never raises.

Seeds are the golden corpora (formatting and diagnostics) plus a few
hand-written policy files, mutated by deleting, inserting, duplicating and
swapping characters and tokens.
Example counts are bounded so the whole file runs in a few seconds.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage_dsl.diagnostics import CODES
from memlineage_dsl.parser import parse_source

HERE = Path(__file__).parent
GOLDEN = HERE / "fmt_golden"

HAND_WRITTEN = [
    """sources trusted_tools = ["tool:flight_api", "tool:weather_api"]

policy flight_price_freshness priority 10 {
  on read
  when "flight_price" in memory.tags and age(memory) > 1h
  degrade refresh(memory.creator) score 0.4 cost 0.02
}

policy user_statements_protected priority 100 {
  on update, delete
  when target.creator.kind == user and request.actor.kind != user
  deny "only the user can change what the user stated"
}

test "a stale price is degraded" {
  given memory m { tags: ["flight_price"], creator: "tool:flight_api", created_at: now - 2h }
  expect read m -> degrade
}
""",
    """include "base.mlp"
resolve cost_aware waive_penalty 0.2
const min_conf = 0.7 // no internal reasoning below this

policy reasoning_floor weight 0.5 {
  on read, derive
  when memory.creator.kind == reasoning and memory.confidence < min_conf
  deny "low-confidence reasoning"
}

policy revoked_ancestor {
  on read
  when any(a in ancestors(memory) : a.status == revoked or a.status == superseded)
  degrade mark_pending(), annotate("depends on revoked memory")
  score if memory.reliability > 0.5 then 0.6 else 0.2
}

test "budget" {
  given request { actor: "user:alice", budget: 3 }
  given calls "tool:search" = 100 at now - 5m
  expect act [m, n] by "agent:x" -> deny score 0 .. 0.5 with refresh("x") without annotate("y")
}
""",
]
VALID = HAND_WRITTEN + [p.read_text(encoding="utf-8") for p in sorted(GOLDEN.glob("*.mlp"))]
# The diagnostics golden corpus (`golden/`) holds broken files on purpose: seeds only.
SEEDS = VALID + [p.read_text(encoding="utf-8") for p in sorted(HERE.glob("golden/**/*.mlp"))]

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\w+|==|!=|<=|>=|->|\.\.|\s+|.', re.S)
# Fragments a mutation may insert: grammar words, punctuation, typical mistakes.
FRAGMENTS = [
    "policy",
    "test",
    "const",
    "sources",
    "include",
    "resolve",
    "on",
    "when",
    "whne",
    "deny",
    "allow",
    "degrade",
    "score",
    "cost",
    "priority",
    "weight",
    "given",
    "memory",
    "request",
    "calls",
    "expect",
    "by",
    "with",
    "without",
    "at",
    "if",
    "then",
    "else",
    "and",
    "or",
    "not",
    "in",
    "matches",
    "any",
    "count",
    "now",
    "true",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    ":",
    ".",
    "..",
    "->",
    "=",
    "==",
    "<",
    "-",
    "+",
    "*",
    "/",
    '"',
    "'",
    "#",
    "//",
    "\n",
    " ",
    "1h",
    "90s",
    "500ms",
    "1e999",
    "0.5",
    "x",
    "é",
    "\t",
    "\r",
    "\u2028",
    "\x0c",
    "\x00",
    '"unterminated',
    "\\",
]
CHECK = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def assert_only_diagnostics(text: str) -> None:
    module, diags = parse_source(text, "fuzz.mlp")
    assert module is not None
    for d in diags:
        assert d.code in CODES, d
        assert d.span.line >= 1 and d.span.column >= 1, (d, text)
        assert d.file == "fuzz.mlp"


@st.composite
def mutated(draw: st.DrawFn, unit: str) -> str:
    text = draw(st.sampled_from(SEEDS))
    parts = list(text) if unit == "char" else _TOKEN.findall(text)
    for _ in range(draw(st.integers(1, 6))):
        if not parts:
            parts.append(draw(st.sampled_from(FRAGMENTS)))
            continue
        i = draw(st.integers(0, len(parts) - 1))
        j = draw(st.integers(0, len(parts) - 1))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "swap", "truncate"]))
        if op == "delete":
            del parts[i]
        elif op == "insert":
            parts.insert(i, draw(st.sampled_from(FRAGMENTS)))
        elif op == "duplicate":
            parts.insert(i, parts[j])
        elif op == "swap":
            parts[i], parts[j] = parts[j], parts[i]
        else:
            parts = parts[:i]
    return "".join(parts)


def test_seeds_parse_cleanly() -> None:
    for text in VALID:
        _, diags = parse_source(text)
        assert diags == []


@CHECK
@given(st.text(max_size=200))
def test_random_text(text: str) -> None:
    assert_only_diagnostics(text)


@CHECK
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map(" ".join))
def test_random_fragments(text: str) -> None:
    assert_only_diagnostics(text)


@CHECK
@given(mutated("char"))
def test_character_mutations(text: str) -> None:
    assert_only_diagnostics(text)


@CHECK
@given(mutated("token"))
def test_token_mutations(text: str) -> None:
    assert_only_diagnostics(text)
