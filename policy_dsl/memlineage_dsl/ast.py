"""Typed, immutable AST of the `.mlp` language.

Every node keeps its source span, but the span is left out of equality and
hashing (as Cedar does), so two ASTs that differ only in layout compare equal:
that is what makes `parse(format(x)) == parse(x)` a one-line property.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Span:
    """1-based line/column of the first character; end is exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def join(a: Span, b: Span) -> Span:
        return Span(a.line, a.column, b.end_line, b.end_column)


NO_SPAN = Span(0, 0, 0, 0)


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True, slots=True)
class Number:
    value: float
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Duration:
    """A duration literal, held in seconds (`90s`, `5m`, `1h`, `7d`)."""

    seconds: float
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Str:
    value: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Bool:
    value: bool
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Now:
    """The decision time (`request.time`): injected, never the wall clock."""

    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Name:
    id: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Attr:
    obj: Expr
    name: str
    span: Span = _span()
    name_span: Span = _span()


@dataclass(frozen=True, slots=True)
class Call:
    func: str
    args: tuple[Expr, ...]
    span: Span = _span()
    func_span: Span = _span()


@dataclass(frozen=True, slots=True)
class Quant:
    """`any|all|count|min|max|sum(var in collection : body)`."""

    kind: str
    var: str
    collection: Expr
    body: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class ListLit:
    items: tuple[Expr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "not" | "-"
    operand: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # and or == != < <= > >= in "not in" matches + - * /
    left: Expr
    right: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Cond:
    test: Expr
    then: Expr
    otherwise: Expr
    span: Span = _span()


Expr = (
    Number
    | Duration
    | Str
    | Bool
    | Now
    | Name
    | Attr
    | Call
    | Quant
    | ListLit
    | Unary
    | Binary
    | Cond
)


# ---------------------------------------------------------------- declarations
@dataclass(frozen=True, slots=True)
class Ident:
    """A bare name with its own span (operation names, test memory names)."""

    name: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Include:
    path: str
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Option:
    name: str
    value: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Resolve:
    strategy: str
    options: tuple[Option, ...]
    span: Span = _span()
    strategy_span: Span = _span()


@dataclass(frozen=True, slots=True)
class Const:
    name: str
    value: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Sources:
    """A named list of globs: `sources` (creator ids) or `actions` (action names)."""

    name: str
    patterns: tuple[str, ...]
    span: Span = _span()
    kind: str = "sources"  # sources | actions


@dataclass(frozen=True, slots=True)
class Obligation:
    name: str
    args: tuple[Expr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Message:
    """A message with values: `"{memory.creator.id} is not trusted"`.

    `parts` alternate text and expressions, with at least one expression (a message
    without one stays a plain `str`); text parts are non-empty and never adjacent.
    The expressions' spans point into the string, where the user wrote them."""

    parts: tuple[str | Expr, ...]
    span: Span = _span()

    @property
    def values(self) -> tuple[Expr, ...]:
        return tuple(p for p in self.parts if not isinstance(p, str))


@dataclass(frozen=True, slots=True)
class Effect:
    kind: str  # allow | deny | degrade
    obligations: tuple[Obligation, ...]
    message: str | Message | None  # str: plain text (`{{` already read as `{`)
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    ops: tuple[Ident, ...]
    when: Expr | None
    effect: Effect | None
    priority: Expr | None = None
    weight: Expr | None = None
    score: Expr | None = None
    cost: Expr | None = None
    span: Span = _span()
    name_span: Span = _span()


# ---------------------------------------------------------------- tests
@dataclass(frozen=True, slots=True)
class Field:
    name: str
    value: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class GivenMemory:
    name: str
    fields: tuple[Field, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class GivenRequest:
    fields: tuple[Field, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class GivenCalls:
    source: str
    count: Expr
    at: Expr | None
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class GivenActs:
    """Allowed actions of a name counted by `acts()`: `given acts "send_money" = 2`."""

    action: str
    count: Expr
    at: Expr | None
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class GivenGrant:
    name: str
    fields: tuple[Field, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class ActArg:
    """`recipient: [bill] "acct-7"` in `expect act pay(recipient: [bill]) -> deny`."""

    name: str
    sources: tuple[Ident, ...]
    value: str | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True)
class ActCall:
    """The action an `expect act` names, with its arguments."""

    action: Ident
    args: tuple[ActArg, ...]


@dataclass(frozen=True, slots=True)
class Expect:
    op: Ident
    targets: tuple[Ident, ...]
    actor: str | None
    effect: str
    score_low: float | None = None
    score_high: float | None = None
    with_obligations: tuple[Obligation, ...] = ()
    without_obligations: tuple[Obligation, ...] = ()
    span: Span = _span()
    call: ActCall | None = None  # `expect act NAME(arg: [..], ...)`; targets: relied on


TestStmt = GivenMemory | GivenRequest | GivenCalls | GivenActs | GivenGrant | Expect


@dataclass(frozen=True, slots=True)
class Test:
    name: str
    stmts: tuple[TestStmt, ...]
    span: Span = _span()


Item = Include | Resolve | Const | Sources | Policy | Test


@dataclass(frozen=True, slots=True)
class Module:
    items: tuple[Item, ...]
    path: str = field(default="<string>", compare=False)
