"""Hypothesis strategies for `.mlp` ASTs and source text.

`modules()` builds random but well-formed ASTs (anything the parser can
produce: e.g. never `Unary("-", Number)`, which the parser folds into a
negative number); `well_typed_policy_sets()` builds policy sets over the
schema, as text, for evaluation properties.
"""

from __future__ import annotations

import re
from functools import cache

from hypothesis import strategies as st
from memlineage_dsl import ast as A
from memlineage_dsl.formatter import format_module
from memlineage_dsl.parser import duration_seconds, lark_parser
from memlineage_dsl.schema import OPERATIONS


@cache
def keywords() -> frozenset[str]:
    """Words the grammar reserves somewhere: never generated as plain names."""
    return frozenset(
        t.pattern.value
        for t in lark_parser().terminals
        if t.pattern.type == "str" and t.pattern.value.isalpha()
    )


names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True).filter(
    lambda n: n not in keywords()
)
# After `.` only a NAME can follow, so keywords are fine there (`memory.cost`).
attr_names = names | st.sampled_from(["cost", "score", "priority", "weight", "in", "memory"])

_STRING_CHARS = st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from(
    ['"', "\\", "\n", "\t", "#", "/", "é", "\u2028", "🙂"]
)
strings = st.text(_STRING_CHARS, max_size=10)

numbers = st.one_of(
    st.integers(-(10**6), 10**6).map(float),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 0.5, 1e-05, 1e16, 1e300, float("inf")]),
)
durations = st.builds(
    lambda n, frac, unit: duration_seconds(f"{n}{frac}{unit}"),
    st.integers(0, 100_000),
    st.sampled_from(["", "", ".5", ".25"]),
    st.sampled_from(["ms", "s", "m", "h", "d", "w"]),
)


def _neg(x: A.Expr) -> A.Expr:
    """`-x` as the parser reads it: a minus on a number literal is folded."""
    return A.Number(-x.value) if isinstance(x, A.Number) else A.Unary("-", x)


_LEAVES: st.SearchStrategy[A.Expr] = st.one_of(
    st.builds(A.Number, numbers),
    st.builds(A.Duration, durations),
    st.builds(A.Str, strings),
    st.builds(A.Bool, st.booleans()),
    st.just(A.Now()),
    st.builds(A.Name, names),
)
_BIN_OPS = [
    "and",
    "or",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "not in",
    "matches",
    "+",
    "-",
    "*",
    "/",
]


def _extend(sub: st.SearchStrategy[A.Expr]) -> st.SearchStrategy[A.Expr]:
    args = st.lists(sub, max_size=3).map(tuple)
    return st.one_of(
        st.builds(A.Attr, sub, attr_names),
        st.builds(A.Call, names, args),
        st.builds(
            A.Quant, st.sampled_from(["any", "all", "count", "min", "max", "sum"]), names, sub, sub
        ),
        st.builds(A.ListLit, args),
        st.builds(A.Unary, st.just("not"), sub),
        st.builds(_neg, sub),
        st.builds(A.Binary, st.sampled_from(_BIN_OPS), sub, sub),
        st.builds(A.Cond, sub, sub, sub),
    )


exprs: st.SearchStrategy[A.Expr] = st.recursive(_LEAVES, _extend, max_leaves=10)


# ---------------------------------------------------------------- items
def _message(parts: list[str | A.Expr]) -> str | A.Message:
    """Text and values as the parser reads them: text merged, never empty; no value
    at all is a plain string."""
    merged: list[str | A.Expr] = []
    for part in parts:
        if isinstance(part, str):
            if not part:
                continue
            if merged and isinstance(merged[-1], str):
                merged[-1] += part
                continue
        merged.append(part)
    if all(isinstance(p, str) for p in merged):
        return "".join(p for p in merged if isinstance(p, str))
    return A.Message(tuple(merged))


_MESSAGE_TEXT = st.text(_STRING_CHARS | st.sampled_from(["{", "}", " "]), max_size=8)
messages = st.lists(_MESSAGE_TEXT | exprs, min_size=1, max_size=4).map(_message)
obligations = st.builds(A.Obligation, names, st.lists(exprs, max_size=2).map(tuple))
effects = st.builds(
    A.Effect,
    st.sampled_from(["allow", "deny", "degrade"]),
    st.lists(obligations, max_size=2).map(tuple),
    st.none() | strings | messages,
)
_opt = st.none() | exprs
policies = st.builds(
    A.Policy,
    name=names,
    ops=st.lists(st.sampled_from(OPERATIONS) | names, max_size=3).map(
        lambda ops: tuple(A.Ident(o) for o in ops)
    ),
    when=_opt,
    effect=st.none() | effects,
    priority=_opt,
    weight=_opt,
    score=_opt,
    cost=_opt,
)
fields = st.lists(st.builds(A.Field, names, exprs), max_size=3).map(tuple)
_score = st.floats(0, 1e6, allow_nan=False) | st.integers(0, 100).map(float)


@st.composite
def expects(draw: st.DrawFn) -> A.Expect:
    low = high = None
    if draw(st.booleans()):
        low = draw(_score)
        high = draw(st.just(low) | _score)
    oblig = st.lists(obligations, max_size=2).map(tuple)
    return A.Expect(
        op=A.Ident(draw(st.sampled_from(OPERATIONS))),
        targets=tuple(A.Ident(n) for n in draw(st.lists(names, min_size=1, max_size=3))),
        actor=draw(st.none() | strings),
        effect=draw(st.sampled_from(["allow", "deny", "degrade"])),
        score_low=low,
        score_high=high,
        with_obligations=draw(oblig),
        without_obligations=draw(oblig),
    )


statements = st.one_of(
    st.builds(A.GivenMemory, names, fields),
    st.builds(A.GivenRequest, fields),
    st.builds(A.GivenCalls, strings, exprs, st.none() | exprs),
    expects(),
)
items: st.SearchStrategy[A.Item] = st.one_of(
    st.builds(A.Include, strings),
    st.builds(A.Resolve, names, st.lists(st.builds(A.Option, names, exprs), max_size=2).map(tuple)),
    st.builds(A.Const, names, exprs),
    st.builds(A.Sources, names, st.lists(strings, max_size=3).map(tuple)),
    policies,
    st.builds(A.Test, strings, st.lists(statements, max_size=4).map(tuple)),
)


def modules(max_items: int = 6) -> st.SearchStrategy[A.Module]:
    return st.lists(items, max_size=max_items).map(lambda its: A.Module(tuple(its)))


# ---------------------------------------------------------------- well-typed
def _attr(*path: str) -> A.Expr:
    node: A.Expr = A.Name(path[0])
    for name in path[1:]:
        node = A.Attr(node, name)
    return node


def _cmp(op: str, left: A.Expr, right: A.Expr) -> A.Expr:
    return A.Binary(op, left, right)


_unit = st.integers(0, 100).map(lambda n: A.Number(n / 100))
_durations = durations.filter(lambda s: s > 0).map(A.Duration)
# a counter window the sidecar can answer: more than 0, at most the 7 days it keeps
_windows = durations.filter(lambda s: 0 < s <= 7 * 86400).map(A.Duration)
_cmp_ops = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
_TOOLS = ["tool:flight_api", "tool:weather_api", "tool:search", "tool:x"]
_TAGS = ["flight_price", "weather", "pii", "preference"]
_KINDS = ["user", "tool", "reasoning", "agent", "system"]
_STATUSES = ["active", "pending_verification", "revoked", "superseded", "archived"]
_ancestor_body = st.one_of(
    st.builds(lambda s: _cmp("==", _attr("a", "status"), A.Name(s)), st.sampled_from(_STATUSES)),
    st.builds(lambda n: _cmp("<", _attr("a", "confidence"), n), _unit),
)

typed_conditions_base: st.SearchStrategy[A.Expr] = st.one_of(
    st.builds(lambda op, n: _cmp(op, _attr("memory", "confidence"), n), _cmp_ops, _unit),
    st.builds(lambda op, n: _cmp(op, _attr("memory", "reliability"), n), _cmp_ops, _unit),
    st.builds(lambda op, d: _cmp(op, A.Call("age", (A.Name("memory"),)), d), _cmp_ops, _durations),
    st.builds(lambda t: _cmp("in", A.Str(t), _attr("memory", "tags")), st.sampled_from(_TAGS)),
    st.builds(
        lambda op, k: _cmp(op, _attr("memory", "creator", "kind"), A.Name(k)),
        st.sampled_from(["==", "!="]),
        st.sampled_from(_KINDS),
    ),
    st.builds(
        lambda k: _cmp("!=", _attr("request", "actor", "kind"), A.Name(k)), st.sampled_from(_KINDS)
    ),
    st.builds(
        lambda s: _cmp("==", _attr("memory", "status"), A.Name(s)), st.sampled_from(_STATUSES)
    ),
    st.builds(
        lambda pat: _cmp("matches", _attr("memory", "creator", "id"), A.Str(pat)),
        st.sampled_from(["tool:*", "user:*", "tool:flight_*"]),
    ),
    st.builds(
        lambda q, fn, body: A.Quant(q, "a", A.Call(fn, (A.Name("memory"),)), body),
        st.sampled_from(["any", "all"]),
        st.sampled_from(["ancestors", "descendants"]),
        _ancestor_body,
    ),
    st.builds(
        lambda tool, d, op, n: _cmp(op, A.Call("calls", (A.Str(tool), d)), A.Number(float(n))),
        st.sampled_from(_TOOLS),
        _windows,
        _cmp_ops,
        st.integers(0, 50),
    ),
    st.builds(lambda b: _cmp("==", _attr("memory", "known"), A.Bool(b)), st.booleans()),
    st.just(_cmp("in", _attr("memory", "creator", "id"), A.Name("trusted"))),
)
typed_conditions: st.SearchStrategy[A.Expr] = st.recursive(
    typed_conditions_base,
    lambda sub: st.one_of(
        st.builds(A.Binary, st.sampled_from(["and", "or"]), sub, sub),
        st.builds(A.Unary, st.just("not"), sub),
    ),
    max_leaves=6,
)
typed_obligations = st.one_of(
    st.builds(lambda t: A.Obligation("refresh", (A.Str(t),)), st.sampled_from(_TOOLS)),
    st.builds(
        lambda s: A.Obligation("annotate", (A.Str(s),)),
        st.sampled_from(["may be stale", "unverified"]),
    ),
    st.builds(lambda n: A.Obligation("downrank", (A.Number(n / 10),)), st.integers(1, 10)),
    st.just(A.Obligation("mark_pending", ())),
    st.just(A.Obligation("require_confirmation", (A.Str("please confirm"),))),
)
typed_scores = st.one_of(
    _unit,
    st.just(_attr("memory", "confidence")),
    st.builds(lambda n: A.Binary("*", _attr("memory", "confidence"), n), _unit),
    st.builds(A.Cond, typed_conditions_base, _unit, _unit),
)


# Messages with values of every type a message shows (the memory may be unknown:
# showing its lineage then fails the rule closed, which the properties allow).
typed_messages = st.sampled_from(
    [
        A.Message(("confidence ", _attr("memory", "confidence"), " is {low}")),
        A.Message(
            (_attr("memory", "creator", "id"), " made it ", A.Call("age", (A.Name("memory"),)))
        ),
        A.Message(("tags: ", _attr("memory", "tags"), ", created ", _attr("memory", "created_at"))),
        A.Message(("id ", _attr("memory", "id"), " by ", _attr("request", "actor"))),
        A.Message(("known: ", _attr("memory", "known"))),
    ]
)


@st.composite
def typed_policies(draw: st.DrawFn, name: str) -> A.Policy:
    kind = draw(st.sampled_from(["allow", "deny", "degrade"]))
    obligations = draw(st.lists(typed_obligations, max_size=2)) if kind == "degrade" else []
    ops = draw(
        st.lists(
            st.sampled_from(["read", "write", "update", "delete", "derive"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    return A.Policy(
        name=name,
        ops=tuple(A.Ident(o) for o in ops),
        when=draw(st.none() | typed_conditions),
        effect=A.Effect(
            kind, tuple(obligations), draw(st.none() | st.just(f"{name} applies") | typed_messages)
        ),
        priority=draw(st.none() | st.integers(0, 100).map(lambda n: A.Number(float(n)))),
        weight=draw(st.none() | st.integers(1, 100).map(lambda n: A.Number(n / 100))),
        score=draw(st.none() | typed_scores) if kind == "degrade" else None,
        cost=draw(st.none() | st.integers(0, 100).map(lambda n: A.Number(n / 100))),
    )


@st.composite
def well_typed_policy_sets(draw: st.DrawFn, max_policies: int = 5) -> str:
    """`.mlp` text of 1..max_policies well-typed policies (and the source list they use).

    The checker finds no errors in them (warnings such as shadowed or
    conflicting rules are expected: they are legal policy sets)."""
    count = draw(st.integers(1, max_policies))
    policies_ = [draw(typed_policies(f"p{i}")) for i in range(count)]
    text = format_module(A.Module(tuple(policies_)))
    if "in trusted" not in text:
        return text
    tools = draw(st.lists(st.sampled_from(_TOOLS), min_size=1, max_size=3, unique=True))
    return format_module(A.Module((A.Sources("trusted", tuple(tools)), *policies_)))


# ---------------------------------------------------------------- messy text
_TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?:ms|s|m|h|d|w)?'
    r"|[A-Za-z_][A-Za-z0-9_]*|==|!=|<=|>=|->|\.\.|\S"
)
_SEPARATORS = [" ", " ", "  ", "\n", "\n\n", "\t", "\n    ", "#", "//", "\n#"]


@st.composite
def messy_sources(draw: st.DrawFn, max_items: int = 5) -> tuple[str, A.Module, list[str]]:
    """(text, module, comments): the module's tokens re-joined with random spacing,
    line breaks and comments in every position, to test what `fmt` keeps."""
    module = draw(modules(max_items))
    tokens = _TOKEN.findall(format_module(module))
    comments: list[str] = []
    out = []
    for tok in ["", *tokens]:
        out.append(tok)
        sep = draw(st.sampled_from(_SEPARATORS))
        if sep.lstrip("\n") in ("#", "//"):
            text = f"{sep.lstrip()} <c{len(comments)}>"
            comments.append(text)
            sep = sep[: sep.index(text[0])] + f" {text}\n"
        out.append(sep)
    return "".join(out), module, comments
