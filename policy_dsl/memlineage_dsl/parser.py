"""Text -> AST, collecting every syntax error with a position and a hint.

One LALR parser is built once from `grammar.lark` and cached. On a syntax error
the text is cut into top-level items (a line that starts with `policy`,
`test`, `const`, `sources`, `include` or `resolve` outside braces) and each
item is parsed on its own, so one broken policy does not hide the errors of
the next one and the good items still reach the checker.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from lark import Token, Tree, v_args
from lark.exceptions import UnexpectedInput, VisitError
from lark.tree import Meta
from lark.visitors import Transformer_NonRecursive

from . import ast as A
from .diagnostics import Diagnostic, SourceFile, source_text
from .limits import CHAIN_OPS, MAX_DEPTH, balance, item_exprs, too_deep
from .messages import Hole, TemplateError, decode, relocate, split
from .recovery import mend
from .syntax import MAX_REPAIRS, error_to_diag, lark_parser, tok_span

__all__ = ["duration_seconds", "lark_parser", "parse_expr", "parse_source", "unquote"]

_T = TypeVar("_T")

TOP_LEVEL_KEYWORDS = ("policy", "test", "const", "sources", "actions", "include", "resolve")


def _span_of(meta: Meta) -> A.Span:
    if getattr(meta, "empty", True):
        return A.NO_SPAN
    return A.Span(meta.line, meta.column, meta.end_line, meta.end_column)


def unquote(tok: str) -> str:
    """Decode a STRING token: JSON-like escapes `\\"`, `\\\\`, `\\n`, `\\t`."""
    body = tok[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def duration_seconds(text: str) -> float:
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d|w)", text)
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


class _SyntaxIssue(Exception):
    """A structural mistake found while building the AST (duplicate clause…)."""

    def __init__(self, code: str, span: A.Span, message: str, help: str | None = None):
        super().__init__(message)
        self.code, self.span, self.message, self.help = code, span, message, help


def _drop_none(items: Sequence[_T | None]) -> tuple[_T, ...]:
    return tuple(i for i in items if i is not None)


# Children of a rule, as the grammar builds them: expressions are already `ast`
# nodes (the transformer works bottom up), names and strings are Tokens, and an
# optional part left out (`[...]`, maybe_placeholders) is None. A rule with children
# of more than one kind takes `list[Any]`, each one of them used as its rule says.
Exprs = list[A.Expr]
Tokens = list[Token]
Mixed = list[Any]
MaybeExprs = list[A.Expr | None]
MaybeTokens = list[Token | None]
MaybeFields = list[A.Field | None]
Obligations = list[A.Obligation]
Items = list[A.Item]
Clause = tuple[str, Any, A.Span]  # ("on" | "when" | ..., its value, its span)
ExpectOpt = tuple[str, Any]  # ("score", (low, high)) | ("with" | "without", obligations)
Clauses = list[Clause]


# The rules that continue a chain of one associative operator (see `limits.balance`).
_CHAIN_RULES = {"and_": "and", "or_": "or", "add": "+"}


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive[Token, Items]):
    """Parse tree -> `ast` nodes. Raises `_SyntaxIssue` for clause-level mistakes.

    Non-recursive (a long chain is a deep parse tree). A chain of one associative
    operator is built as written, then balanced where it ends: when it becomes the
    operand of anything but the same operator."""

    def _call_userfunc(self, tree: Tree[Token], new_children: list[Any] | None = None) -> Any:
        children = tree.children if new_children is None else new_children
        same = _CHAIN_RULES.get(str(tree.data))
        children = [
            c
            if not isinstance(c, A.Binary) or c.op not in CHAIN_OPS or c.op == same
            else balance(c)
            for c in children
        ]
        # lark's own method is untyped; it calls the rule method of `tree.data`
        return super()._call_userfunc(tree, children)  # type: ignore[no-untyped-call]

    # -- expressions
    def number(self, meta: Meta, ch: Tokens) -> A.Number:
        return A.Number(float(ch[0]), span=_span_of(meta))

    def duration(self, meta: Meta, ch: Tokens) -> A.Duration:
        return A.Duration(duration_seconds(str(ch[0])), span=_span_of(meta))

    def string(self, meta: Meta, ch: Tokens) -> A.Str:
        return A.Str(unquote(str(ch[0])), span=_span_of(meta))

    def true(self, meta: Meta, ch: Tokens) -> A.Bool:
        return A.Bool(True, span=_span_of(meta))

    def false(self, meta: Meta, ch: Tokens) -> A.Bool:
        return A.Bool(False, span=_span_of(meta))

    def now(self, meta: Meta, ch: Tokens) -> A.Now:
        return A.Now(span=_span_of(meta))

    def name(self, meta: Meta, ch: Tokens) -> A.Name:
        return A.Name(str(ch[0]), span=_span_of(meta))

    def attr(self, meta: Meta, ch: Mixed) -> A.Attr:  # [expr, NAME]
        return A.Attr(ch[0], str(ch[1]), span=_span_of(meta), name_span=tok_span(ch[1]))

    def call(self, meta: Meta, ch: Mixed) -> A.Call:  # [NAME, expr | None, ...]
        return A.Call(
            str(ch[0]), _drop_none(ch[1:]), span=_span_of(meta), func_span=tok_span(ch[0])
        )

    def quant_kind(self, meta: Meta, ch: Tokens) -> str:
        return str(ch[0])

    def quant(self, meta: Meta, ch: Mixed) -> A.Quant:  # [kind, NAME, expr, expr]
        kind, var, coll, body = ch
        return A.Quant(kind, str(var), coll, body, span=_span_of(meta))

    def list(self, meta: Meta, ch: MaybeExprs) -> A.ListLit:
        return A.ListLit(_drop_none(ch), span=_span_of(meta))

    def neg(self, meta: Meta, ch: Exprs) -> A.Expr:
        operand = ch[0]
        if isinstance(operand, A.Number):
            return A.Number(-operand.value, span=_span_of(meta))
        return A.Unary("-", operand, span=_span_of(meta))

    def not_(self, meta: Meta, ch: Exprs) -> A.Unary:
        return A.Unary("not", ch[0], span=_span_of(meta))

    def _bin(self, op: str, meta: Meta, left: A.Expr, right: A.Expr) -> A.Binary:
        return A.Binary(op, left, right, span=_span_of(meta))

    def or_(self, meta: Meta, ch: Exprs) -> A.Binary:
        return self._bin("or", meta, ch[0], ch[1])

    def and_(self, meta: Meta, ch: Exprs) -> A.Binary:
        return self._bin("and", meta, ch[0], ch[1])

    def compare(self, meta: Meta, ch: Mixed) -> A.Binary:  # [expr, COMP_OP, expr]
        return self._bin(str(ch[1]), meta, ch[0], ch[2])

    def in_(self, meta: Meta, ch: Exprs) -> A.Binary:
        return self._bin("in", meta, ch[0], ch[1])

    def not_in(self, meta: Meta, ch: Exprs) -> A.Binary:
        return self._bin("not in", meta, ch[0], ch[1])

    def matches(self, meta: Meta, ch: Exprs) -> A.Binary:
        return self._bin("matches", meta, ch[0], ch[1])

    def add(self, meta: Meta, ch: Exprs) -> A.Binary:
        return self._bin("+", meta, ch[0], ch[1])

    def sub(self, meta: Meta, ch: Exprs) -> A.Binary:
        return self._bin("-", meta, ch[0], ch[1])

    def mul(self, meta: Meta, ch: Exprs) -> A.Binary:
        return self._bin("*", meta, ch[0], ch[1])

    def div(self, meta: Meta, ch: Exprs) -> A.Binary:
        return self._bin("/", meta, ch[0], ch[1])

    def cond(self, meta: Meta, ch: Exprs) -> A.Cond:
        return A.Cond(ch[0], ch[1], ch[2], span=_span_of(meta))

    # -- top level
    def include(self, meta: Meta, ch: Tokens) -> A.Include:
        return A.Include(unquote(str(ch[0])), span=_span_of(meta))

    def resolve_opt(self, meta: Meta, ch: Mixed) -> A.Option:  # [NAME, expr]
        return A.Option(str(ch[0]), ch[1], span=_span_of(meta))

    def resolve(self, meta: Meta, ch: Mixed) -> A.Resolve:  # [NAME, option, ...]
        return A.Resolve(
            str(ch[0]), tuple(ch[1:]), span=_span_of(meta), strategy_span=tok_span(ch[0])
        )

    def const_def(self, meta: Meta, ch: Mixed) -> A.Const:  # [NAME, expr]
        return A.Const(str(ch[0]), ch[1], span=_span_of(meta))

    def sources_def(self, meta: Meta, ch: MaybeTokens) -> A.Sources:
        return A.Sources(
            str(ch[0]),
            tuple(unquote(str(t)) for t in ch[1:] if t is not None),
            span=_span_of(meta),
        )

    def actions_def(self, meta: Meta, ch: MaybeTokens) -> A.Sources:
        return A.Sources(
            str(ch[0]),
            tuple(unquote(str(t)) for t in ch[1:] if t is not None),
            span=_span_of(meta),
            kind="actions",
        )

    # -- policies
    def priority_opt(self, meta: Meta, ch: Exprs) -> Clause:
        return ("priority", ch[0], _span_of(meta))

    def weight_opt(self, meta: Meta, ch: Exprs) -> Clause:
        return ("weight", ch[0], _span_of(meta))

    def policy_opt(self, meta: Meta, ch: Clauses) -> Clause:  # pragma: no cover - aliased
        return ch[0]

    def on_clause(self, meta: Meta, ch: Tokens) -> Clause:
        return ("on", tuple(A.Ident(str(t), span=tok_span(t)) for t in ch), _span_of(meta))

    def when_clause(self, meta: Meta, ch: Exprs) -> Clause:
        return ("when", ch[0], _span_of(meta))

    def effect(self, meta: Meta, ch: Tokens) -> str:
        return str(ch[0])

    def obligation(self, meta: Meta, ch: Mixed) -> A.Obligation:  # [NAME, expr | None...]
        return A.Obligation(str(ch[0]), _drop_none(ch[1:]), span=_span_of(meta))

    def effect_clause(self, meta: Meta, ch: Mixed) -> Clause:  # [effect, ob..., STRING]
        kind = ch[0]
        message: str | A.Message | None = None
        obligations = []
        for c in ch[1:]:
            if isinstance(c, Token):
                message = _message(c)
            elif c is not None:
                obligations.append(c)
        effect = A.Effect(kind, tuple(obligations), message, span=_span_of(meta))
        return ("effect", effect, _span_of(meta))

    def score_clause(self, meta: Meta, ch: Exprs) -> Clause:
        return ("score", ch[0], _span_of(meta))

    def cost_clause(self, meta: Meta, ch: Exprs) -> Clause:
        return ("cost", ch[0], _span_of(meta))

    def policy(self, meta: Meta, ch: Mixed) -> A.Policy:  # [NAME, clause, ...]
        name_tok = ch[0]
        slots: dict[str, Any] = {}
        for kind, value, span in ch[1:]:
            if kind in slots:
                what = "effect (allow/deny/degrade)" if kind == "effect" else f"`{kind}` clause"
                raise _SyntaxIssue(
                    "E303",
                    span,
                    f"duplicate {what} in policy `{name_tok}`",
                    "a policy has one effect; split it into two policies"
                    if kind == "effect"
                    else f"a policy has at most one `{kind}`; combine them with `and` or `,`",
                )
            slots[kind] = value
        return A.Policy(
            name=str(name_tok),
            ops=slots.get("on", ()),
            when=slots.get("when"),
            effect=slots.get("effect"),
            priority=slots.get("priority"),
            weight=slots.get("weight"),
            score=slots.get("score"),
            cost=slots.get("cost"),
            span=_span_of(meta),
            name_span=tok_span(name_tok),
        )

    # -- tests
    def field(self, meta: Meta, ch: Mixed) -> A.Field:  # [NAME, expr]
        return A.Field(str(ch[0]), ch[1], span=_span_of(meta))

    def given_memory(self, meta: Meta, ch: Mixed) -> A.GivenMemory:  # [NAME, field...]
        return A.GivenMemory(str(ch[0]), _drop_none(ch[1:]), span=_span_of(meta))

    def given_request(self, meta: Meta, ch: MaybeFields) -> A.GivenRequest:
        return A.GivenRequest(_drop_none(ch), span=_span_of(meta))

    def given_calls(self, meta: Meta, ch: Mixed) -> A.GivenCalls:  # [STRING, expr, expr?]
        return A.GivenCalls(unquote(str(ch[0])), ch[1], ch[2], span=_span_of(meta))

    def given_acts(self, meta: Meta, ch: Mixed) -> A.GivenActs:  # [STRING, expr, expr?]
        return A.GivenActs(unquote(str(ch[0])), ch[1], ch[2], span=_span_of(meta))

    def given_grant(self, meta: Meta, ch: Mixed) -> A.GivenGrant:  # [NAME, field...]
        return A.GivenGrant(str(ch[0]), _drop_none(ch[1:]), span=_span_of(meta))

    def act_arg(self, meta: Meta, ch: Mixed) -> A.ActArg:  # [NAME, NAME..., STRING?]
        *names, value = ch
        if value is not None and value.type == "NAME":  # no value: the last is a source
            names, value = [*names, value], None
        return A.ActArg(
            str(names[0]),
            tuple(A.Ident(str(t), span=tok_span(t)) for t in names[1:] if t is not None),
            unquote(str(value)) if value is not None else None,
            span=_span_of(meta),
        )

    def target_action(self, meta: Meta, ch: Mixed) -> tuple[A.ActCall, tuple[A.Ident, ...]]:
        action, *rest = ch
        args = tuple(x for x in rest if isinstance(x, A.ActArg))
        relied = tuple(A.Ident(str(t), span=tok_span(t)) for t in rest if isinstance(t, Token))
        return (A.ActCall(A.Ident(str(action), span=tok_span(action)), args), relied)

    def target_one(self, meta: Meta, ch: Tokens) -> tuple[A.Ident, ...]:
        return (A.Ident(str(ch[0]), span=tok_span(ch[0])),)

    def target_many(self, meta: Meta, ch: Tokens) -> tuple[A.Ident, ...]:
        return tuple(A.Ident(str(t), span=tok_span(t)) for t in ch)

    def expect_score(self, meta: Meta, ch: Mixed) -> ExpectOpt:  # [number, number | None]
        low = ch[0].value
        high = ch[1].value if ch[1] is not None else low
        return ("score", (low, high))

    def expect_with(self, meta: Meta, ch: Obligations) -> ExpectOpt:
        return ("with", tuple(ch))

    def expect_without(self, meta: Meta, ch: Obligations) -> ExpectOpt:
        return ("without", tuple(ch))

    def expect(self, meta: Meta, ch: Mixed) -> A.Expect:  # [NAME, targets, STRING?, ...]
        op_tok, targets, actor, effect, *opts = ch
        kw: dict[str, Any] = {}
        if targets and isinstance(targets[0], A.ActCall):
            kw["call"], targets = targets
        for key, value in opts:
            if key == "score":
                kw["score_low"], kw["score_high"] = value
            elif key == "with":
                kw["with_obligations"] = kw.get("with_obligations", ()) + value
            else:
                kw["without_obligations"] = kw.get("without_obligations", ()) + value
        return A.Expect(
            A.Ident(str(op_tok), span=tok_span(op_tok)),
            targets,
            unquote(str(actor)) if actor is not None else None,
            effect,
            span=_span_of(meta),
            **kw,
        )

    def test(self, meta: Meta, ch: Mixed) -> A.Test:  # [STRING, statement, ...]
        return A.Test(unquote(str(ch[0])), tuple(ch[1:]), span=_span_of(meta))

    def start(self, meta: Meta, ch: Items) -> Items:
        return list(ch)


def _message(tok: Token) -> str | A.Message:
    """A message's STRING token -> its text, or its text and values (`{...}`), each
    value parsed with its spans in the file. Raises `_SyntaxIssue` where it is wrong."""
    decoded, offsets = decode(str(tok)[1:-1])
    line, base = tok.line or 0, (tok.column or 0) + 1

    def at(k: int) -> int:
        return base + offsets[min(max(k, 0), len(offsets) - 1)]

    try:
        parts = split(decoded)
    except TemplateError as err:
        raise _SyntaxIssue(
            "E001", A.Span(line, at(err.start), line, at(err.end)), err.message, err.help
        ) from None
    if not any(isinstance(p, Hole) for p in parts):
        return "".join(p for p in parts if isinstance(p, str))
    out = [p if isinstance(p, str) else _hole(p, line, at) for p in parts]
    return A.Message(tuple(out), span=tok_span(tok))


def _hole(hole: Hole, line: int, at: Callable[[int], int]) -> A.Expr:
    """The expression of one `{...}`, its spans moved into the string."""
    starts = [0, *(i + 1 for i, c in enumerate(hole.text) if c == "\n")]

    def move(span: A.Span) -> A.Span:
        first = hole.start + starts[span.line - 1] + span.column - 1
        last = hole.start + starts[span.end_line - 1] + span.end_column - 1
        return A.Span(line, at(first), line, at(last))

    try:
        tree: Tree[Token] = lark_parser().parse(hole.text, start="expr")
    except UnexpectedInput as err:
        d = error_to_diag(SourceFile("<value>", hole.text), err, hole.text)
        span = move(d.span)
        if d.code == "E003":  # at the closing brace
            span = A.Span(line, span.column, line, span.column + 1)
        what = "the value in braces ends too soon" if d.code == "E003" else d.message
        raise _SyntaxIssue(d.code, span, what, d.help) from None
    # parsed from `expr`, the transformer's result is an expression, not a list of items
    expr = balance(cast(A.Expr, _ToAst().transform(tree)))
    deep = too_deep(expr)
    if deep is not None:
        raise _SyntaxIssue(
            "E007", move(deep.span), f"expression nested too deeply: more than {MAX_DEPTH} levels"
        )
    return relocate(expr, move)


def _recover(src: SourceFile, text: str, chunked: bool) -> tuple[list[Any], list[Diagnostic]]:
    """Parse one item; on a syntax error, report it, mend it and parse on, so errors
    after the first (a misspelt attribute behind a `5 mins`) are found in one pass.
    A mended item is kept for the checker; the set holds an error, so it never runs."""
    diags: list[Diagnostic] = []
    for _ in range(MAX_REPAIRS):
        try:
            tree: Tree[Token] = lark_parser().parse(text, start="start")
            items: list[Any] = _ToAst().transform(tree)
        except UnexpectedInput as err:
            diags.append(error_to_diag(src, err, text, chunked))
            mended = mend(text, err)
            if mended is None:
                return [], diags
            text = mended
            continue
        except VisitError as err:
            inner = err.orig_exc
            if isinstance(inner, _SyntaxIssue):
                diags.append(src.diag(inner.code, inner.span, inner.message, inner.help))
                return [], diags
            raise
        deep = _too_deep(src, items)
        if deep is not None:
            return [], [*diags, deep]
        return items, diags
    return [], diags


def _item_chunks(text: str) -> list[tuple[int, str]]:
    """Split text into top-level items: (first line number, chunk text)."""
    starts: list[int] = []
    depth = 0
    # lines end at "\n" only, as Lark counts them (not at a form feed or U+2028)
    for n, line in enumerate(text.split("\n"), start=1):
        stripped = line.lstrip()
        word = re.match(r"[A-Za-z_]+", stripped)
        # A keyword in column 1 starts an item even inside an unclosed block, so a
        # missing `}` costs one item, not the rest of the file.
        if word and word.group(0) in TOP_LEVEL_KEYWORDS and (line[:1].isalpha() or depth <= 0):
            starts.append(n)
            depth = 0
        code = re.sub(r'"([^"\\\n]|\\.)*"', '""', line)
        code = re.split(r"#|//", code, maxsplit=1)[0]
        depth += code.count("{") - code.count("}")
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    if not starts or starts[0] != 1:
        starts.insert(0, 1)
    bounds = [*starts, len(lines) + 1]
    return [(a, "".join(lines[a - 1 : b - 1])) for a, b in itertools.pairwise(bounds)]


def _parse_items(
    src: SourceFile, text: str, chunked: bool = False
) -> tuple[list[Any], list[Diagnostic]]:
    try:
        tree: Tree[Token] = lark_parser().parse(text, start="start")
        items: list[Any] = _ToAst().transform(tree)
        deep = _too_deep(src, items)
        return ([], [deep]) if deep is not None else (items, [])
    except UnexpectedInput as err:
        return [], [error_to_diag(src, err, text, chunked)]
    except VisitError as err:
        inner = err.orig_exc
        if isinstance(inner, _SyntaxIssue):
            return [], [src.diag(inner.code, inner.span, inner.message, inner.help)]
        raise


def _too_deep(src: SourceFile, items: list[Any]) -> Diagnostic | None:
    """E007 at the first place an expression nests deeper than MAX_DEPTH, if any."""
    for item in items:
        for expr in item_exprs(item):
            node = too_deep(expr)
            if node is not None:
                at = A.Span(node.span.line, node.span.column, node.span.line, node.span.column + 1)
                return src.diag(
                    "E007",
                    at,
                    f"expression nested too deeply: more than {MAX_DEPTH} levels",
                    "each operator, call, quantifier, `not`, `if` or `-` inside another is one "
                    "level (parentheses alone, and chains of `and`, `or` or `+` of any length, "
                    "are not); simplify the expression",
                )
    return None


def parse_source(text: str, path: str = "<string>") -> tuple[A.Module, list[Diagnostic]]:
    """Parse one file. Always returns a module (the items that parsed) and every error."""
    text = source_text(text)
    src = SourceFile(path, text)
    items, diags = _parse_items(src, text)
    if not diags:
        return A.Module(tuple(items), path=path), []
    items, diags = [], []
    chunks = _item_chunks(text)
    for n, (first_line, chunk) in enumerate(chunks):
        # Pad with newlines so Lark's positions are those of the whole file.
        padded = "\n" * (first_line - 1) + chunk
        chunk_items, chunk_diags = _parse_items(src, padded, n < len(chunks) - 1)
        if chunk_diags and not chunk_items:
            chunk_items, chunk_diags = _recover(src, padded, n < len(chunks) - 1)
        items.extend(chunk_items)
        diags.extend(chunk_diags)
    return A.Module(tuple(items), path=path), sorted(diags, key=Diagnostic.sort_key)


def parse_expr(text: str) -> A.Expr:
    """Parse a single expression (used by tests and the REPL-ish `check` command)."""
    module, diags = parse_source(f"const __expr__ = {text}")
    if diags:
        raise ValueError(f"{diags[0].message} ({diags[0].help})")
    const = module.items[0]
    assert isinstance(const, A.Const)
    return const.value
