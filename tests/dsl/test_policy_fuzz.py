"""No input breaks a policy set or a decision (fuzzed; bounded to a few seconds each).

(a) No `.mlp` text, valid or not — random, mutated from the golden corpus and
`policies/`, or generated deep and long — makes lint, fmt, the test runner or a
build raise. (b) A policy set that lints clean, however extreme its numbers,
compiles, decides every generated request, and its Decision encodes as the
sidecar sends it (int32 priorities, finite scores and costs).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memlineage.grpc_api import serde
from memlineage.v1 import memlineage_pb2 as pb
from memlineage_dsl.diagnostics import has_errors
from memlineage_dsl.evaluator import decide
from memlineage_dsl.facts import Creator, DictSnapshot, MemoryFacts, Request
from memlineage_dsl.formatter import format_source
from memlineage_dsl.pipeline import build_texts, lint_texts
from memlineage_dsl.testing import run_tests
from strategies import well_typed_policy_sets

ROOT = Path(__file__).resolve().parents[2]
CORPUS = [
    p.read_text(encoding="utf-8")
    for p in sorted(
        [*(ROOT / "tests/dsl/golden").rglob("*.mlp"), *(ROOT / "policies").rglob("*.mlp")]
    )
]
FAST = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_EXTREME = [
    "2147483648",
    "-2147483649",
    "1e309",
    "1e308",
    "9" * 400,
    "0",
    "-0",
    "1e-320",
    "2147483647",
    "-2147483648",
    "1e6",
    "1e12",
    "0.5",
]
_SNIPPETS = [
    "(",
    ")",
    "and",
    "or",
    "not",
    "+",
    "-",
    "*",
    "/",
    "any(a in ancestors(memory) : ",
    "if true then ",
    " else ",
    '"',
    "{",
    "}",
    "priority ",
    "weight ",
    "score ",
    "cost ",
    "const X = ",
    'include "x.mlp"',
    "\n",
    "1e309",
    ".",
    ",",
    "[",
    "]",
]


def _everything(text: str) -> None:
    """Every entry point on one text: none may raise."""
    files = {"a.mlp": text}
    lint_texts(files)
    format_source(text, "a.mlp")
    build = build_texts(files)
    if build.compiled is not None and build.env is not None:
        run_tests(build.compiled, build.env)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.integers(0, 3))
        if kind == 0:  # delete a span
            text = text[:at] + text[at + draw(st.integers(1, 20)) :]
        elif kind == 1:  # insert a snippet
            text = text[:at] + draw(st.sampled_from(_SNIPPETS)) + text[at:]
        elif kind == 2:  # an extreme number in place of every number of one line
            text = re.sub(r"\b\d+(\.\d+)?\b", draw(st.sampled_from(_EXTREME)), text, count=3)
        else:  # repeat a span many times
            end = at + draw(st.integers(1, 30))
            text = text[:at] + text[at:end] * draw(st.integers(2, 400)) + text[end:]
    return text


_WRAPS = [
    ("not ", ""),
    ("any(a in [true] : ", ")"),
    ("(true and ", ")"),
    ("-(", ")"),
    ("(1 - ", ")"),
    ("[", "]"),
    ("len(", ")"),
    ("if true then ", " else 1"),
    ("(", ")"),
]


@st.composite
def deep(draw: st.DrawFn) -> str:
    """Well-formed nesting up to far past the limit, and long chains around it."""
    wraps = draw(st.lists(st.sampled_from(_WRAPS), min_size=1, max_size=3))
    depth = draw(st.integers(1, 700))
    body = "true"
    for k in range(depth):
        head, tail = wraps[k % len(wraps)]
        body = head + body + tail
    join = draw(st.sampled_from([" and ", " or ", " + ", " * ", ", "]))
    chain = join.join([body] * draw(st.integers(1, 20)) + ["true"] * draw(st.integers(0, 1500)))
    if draw(st.booleans()):
        chain = chain[: draw(st.integers(0, len(chain)))]  # cut anywhere: broken input too
    where = draw(st.sampled_from(["when {}", "score {}", "cost {}"]))
    return "policy p { on read " + where.format(chain) + " deny }"


@FAST
@given(st.text(max_size=300))
def test_random_text_breaks_nothing(text: str) -> None:
    _everything(text)


@FAST
@given(mutated())
def test_mutated_corpus_breaks_nothing(text: str) -> None:
    _everything(text)


@settings(FAST, max_examples=12)
@given(deep())
def test_deep_and_long_texts_break_nothing(text: str) -> None:
    _everything(text)


# ---------------------------------------------------------------- (b) decisions
_NUMBER = re.compile(r"\b(priority|weight|cost|score) (\d+(?:\.\d+)?)")
_REQ_MEMORY = st.builds(
    lambda conf, age, tags: MemoryFacts(
        id="m",
        tags=tuple(tags),
        creator=Creator("tool", "tool:flight_api"),
        confidence=conf,
        reliability=conf,
        created_at=1_800_000_000.0 - age,
    ),
    st.floats(0, 1),
    st.floats(0, 1e9),
    st.lists(st.sampled_from(["flight_price", "pii"])),
)


@st.composite
def extreme_sets(draw: st.DrawFn) -> str:
    """A well-typed set with some of its numbers replaced by extreme ones."""
    text = draw(well_typed_policy_sets())
    return _NUMBER.sub(
        lambda m: (
            f"{m.group(1)} "
            + (draw(st.sampled_from(_EXTREME)) if draw(st.booleans()) else m.group(2))
        ),
        text,
    )


def _int32(n: int) -> bool:
    return -(2**31) <= n < 2**31


@settings(FAST, max_examples=60)
@given(
    extreme_sets(),
    _REQ_MEMORY,
    st.sampled_from(["read", "write", "update", "delete"]),
    st.floats(0, 1e6) | st.just(math.inf),
)
def test_a_set_that_lints_clean_decides_and_encodes(
    text: str, memory: MemoryFacts, op: str, budget: float
) -> None:
    build = build_texts({"a.mlp": text})
    if has_errors(build.diagnostics):
        return
    assert build.compiled is not None
    for p in build.compiled.policies:
        assert _int32(p.priority) and math.isfinite(p.weight) and p.weight > 0
    req = Request(
        op=op, memory=memory, actor=Creator("user", "user:a"), time=1_800_000_000.0, budget=budget
    )
    d = decide(build.compiled, req, DictSnapshot([memory], []))
    assert math.isfinite(d.compliance_score) and 0 <= d.compliance_score <= 1
    assert math.isfinite(d.expected_cost) and d.expected_cost >= 0
    msg = serde.verdict_to_pb(d)
    back = pb.Decision.FromString(msg.SerializeToString())
    assert [r.priority for r in back.reasons] == [r.priority for r in d.reasons]
    assert all(math.isfinite(o.factor) for o in back.obligations)
