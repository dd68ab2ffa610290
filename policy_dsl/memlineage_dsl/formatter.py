"""AST -> canonical `.mlp` text (`memlineage fmt`), keeping the comments.

The AST has no comments, so `format_source` re-scans the text for them and
hangs each one on the item, clause or test statement whose lines it sits on
(or, for a comment on its own line, the next one), using the node spans.
Output is idempotent and `parse(format(x)) == parse(x)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from . import ast as A
from .diagnostics import Diagnostic, has_errors, source_text
from .limits import chain_operands, is_long_chain
from .messages import message_text
from .parser import duration_seconds, parse_source

INDENT = "  "
CONTINUATION = "    "  # extra indent of a broken `when` line
MAX_LINE = 100

# Precedence levels, loosest first (grammar.lark: cond < or < and < not < ...).
COND, OR, AND, NOT, CMP, SUM, PROD, UNARY, ATOM = range(9)
# op -> (level of the node, minimum level of the left operand, of the right one)
_BINARY: dict[str, tuple[int, int, int]] = {
    "or": (OR, OR, AND),
    "and": (AND, AND, NOT),
    **{op: (CMP, SUM, SUM) for op in ("==", "!=", "<", "<=", ">", ">=", "in", "not in")},
    "matches": (CMP, SUM, SUM),
    "+": (SUM, SUM, PROD),
    "-": (SUM, SUM, PROD),
    "*": (PROD, PROD, UNARY),
    "/": (PROD, PROD, UNARY),
}
# Days are the largest unit printed: `14d` reads better than `2w` (`w` still parses).
_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001))
_GROUPED = (A.Const, A.Sources, A.Include)  # one-liners kept together, no blank line


# ---------------------------------------------------------------- literals
def format_number(value: float) -> str:
    """Integral values without `.0`; `1e999` for infinity (the parser's own reading)."""
    if value != value:  # NaN has no literal
        raise ValueError("NaN has no .mlp literal")
    if value in (float("inf"), float("-inf")):
        return "1e999" if value > 0 else "-1e999"
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def format_duration(seconds: float) -> str:
    """The largest unit up to days that holds the value whole (`90s`, `14d`)."""
    if seconds == 0:
        return "0s"
    for unit, size in _UNITS:
        text = f"{round(seconds / size)}{unit}"
        if duration_seconds(text) == seconds:
            return text
    for unit, size in _UNITS:
        num = repr(seconds / size)
        if "e" not in num and not num.startswith("-") and duration_seconds(num + unit) == seconds:
            return num + unit
    return f"{Decimal(seconds):f}s"  # exact decimal expansion: always reads back equal


def quote(value: str) -> str:
    body = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{body}"'


# ---------------------------------------------------------------- expressions
def format_expr(expr: A.Expr) -> str:
    return _expr(expr)[0]


def _wrap(expr: A.Expr, min_level: int) -> str:
    text, level = _expr(expr)
    return text if level >= min_level else f"({text})"


def _args(args: tuple[A.Expr, ...]) -> str:
    return ", ".join(format_expr(a) for a in args)


def _expr(e: A.Expr) -> tuple[str, int]:
    match e:
        case A.Number(value=v):
            text = format_number(v)
            return text, UNARY if text.startswith("-") else ATOM
        case A.Duration(seconds=s):
            return format_duration(s), ATOM
        case A.Str(value=v):
            return quote(v), ATOM
        case A.Bool(value=b):
            return ("true" if b else "false"), ATOM
        case A.Now():
            return "now", ATOM
        case A.Name(id=n):
            return n, ATOM
        case A.Attr(obj=obj, name=name):
            return f"{_wrap(obj, ATOM)}.{name}", ATOM
        case A.Call(func=func, args=args):
            return f"{func}({_args(args)})", ATOM
        case A.Quant(kind=k, var=v, collection=c, body=b):
            return f"{k}({v} in {format_expr(c)} : {format_expr(b)})", ATOM
        case A.ListLit(items=items):
            return f"[{_args(items)}]", ATOM
        case A.Unary(op="not", operand=x):
            return f"not {_wrap(x, NOT)}", NOT
        case A.Unary(operand=x):
            inner = _wrap(x, UNARY)
            return ("- " if inner.startswith("-") else "-") + inner, UNARY
        case A.Binary(op=op, left=left, right=right):
            level, lmin, rmin = _BINARY[op]
            if is_long_chain(e):  # the parser balanced it: print it flat, as it reads back
                first, *rest = chain_operands(e, op)
                return f" {op} ".join([_wrap(first, lmin), *(_wrap(x, rmin) for x in rest)]), level
            return f"{_wrap(left, lmin)} {op} {_wrap(right, rmin)}", level
        case A.Cond(test=t, then=a, otherwise=b):
            return f"if {format_expr(t)} then {format_expr(a)} else {format_expr(b)}", COND
    raise TypeError(f"not an expression: {e!r}")


def _bool_parts(e: A.Expr, min_level: int) -> list[tuple[str, str]]:
    """Operands of the unparenthesised and/or chain: [("", a), ("and", b), ("or", c)]."""
    if isinstance(e, A.Binary) and e.op in ("and", "or"):
        level, lmin, rmin = _BINARY[e.op]
        if level >= min_level:
            first, *rest = chain_operands(e, e.op) if is_long_chain(e) else [e.left, e.right]
            out = _bool_parts(first, lmin)
            for operand in rest:
                right = _bool_parts(operand, rmin)
                out += [(e.op, right[0][1]), *right[1:]]
            return out
    return [("", _wrap(e, min_level))]


def _when_lines(e: A.Expr) -> list[str]:
    line = f"when {format_expr(e)}"
    if len(INDENT + line) <= MAX_LINE:
        return [line]
    first, *rest = _bool_parts(e, COND)
    return [f"when {first[1]}", *(f"{CONTINUATION}{op} {text}" for op, text in rest)]


# ---------------------------------------------------------------- items
@dataclass
class _Kid:
    """A clause or test statement: its source lines (for comments) and output lines."""

    start: int
    end: int
    lines: list[str]


@dataclass
class _Layout:
    header: str
    block: bool
    kids: list[_Kid] = field(default_factory=list)


def _obligations(obs: tuple[A.Obligation, ...]) -> str:
    return ", ".join(f"{o.name}({_args(o.args)})" for o in obs)


def _kid(spans: list[A.Span], lines: list[str]) -> _Kid:
    return _Kid(spans[0].line, max(s.end_line for s in spans), lines)


def _policy(p: A.Policy) -> _Layout:
    header = f"policy {p.name}"
    if p.priority is not None:
        header += f" priority {format_expr(p.priority)}"
    if p.weight is not None:
        header += f" weight {format_expr(p.weight)}"
    kids = []
    if p.ops:
        ops = ", ".join(o.name for o in p.ops)
        kids.append(_kid([o.span for o in p.ops], [f"on {ops}"]))
    if p.when is not None:
        kids.append(_kid([p.when.span], _when_lines(p.when)))
    if p.effect is not None:
        words = [p.effect.kind]
        if p.effect.obligations:
            words.append(_obligations(p.effect.obligations))
        if p.effect.message is not None:
            words.append(quote(message_text(p.effect.message, format_expr)))
        kids.append(_kid([p.effect.span], [" ".join(words)]))
    for word, value in (("score", p.score), ("cost", p.cost)):
        if value is not None:
            kids.append(_kid([value.span], [f"{word} {format_expr(value)}"]))
    return _Layout(header, True, kids)


def _fields(fields: tuple[A.Field, ...]) -> str:
    inner = ", ".join(f"{f.name}: {format_expr(f.value)}" for f in fields)
    return f"{{ {inner} }}" if inner else "{}"


def _stmt(s: A.TestStmt) -> str:
    match s:
        case A.GivenMemory(name=name, fields=fields):
            return f"given memory {name} {_fields(fields)}"
        case A.GivenRequest(fields=fields):
            return f"given request {_fields(fields)}"
        case A.GivenCalls(source=src, count=count, at=at):
            tail = f" at {format_expr(at)}" if at is not None else ""
            return f"given calls {quote(src)} = {format_expr(count)}{tail}"
        case A.GivenActs(action=action, count=count, at=at):
            tail = f" at {format_expr(at)}" if at is not None else ""
            return f"given acts {quote(action)} = {format_expr(count)}{tail}"
        case A.GivenGrant(name=name, fields=fields):
            return f"given grant {name} {_fields(fields)}"
        case A.Expect():
            return _expect(s)
    raise TypeError(f"not a test statement: {s!r}")


def _act_call(call: A.ActCall, relied: tuple[A.Ident, ...]) -> str:
    args = ", ".join(
        f"{a.name}: [{', '.join(t.name for t in a.sources)}]"
        + (f" {quote(a.value)}" if a.value is not None else "")
        for a in call.args
    )
    tail = f" relying [{', '.join(t.name for t in relied)}]" if relied else ""
    return f"{call.action.name}({args}){tail}"


def _expect(s: A.Expect) -> str:
    if s.call is not None:
        target = _act_call(s.call, s.targets)
    elif len(s.targets) == 1:
        target = s.targets[0].name
    else:
        target = "[" + ", ".join(t.name for t in s.targets) + "]"
    words = ["expect", s.op.name, target]
    if s.actor is not None:
        words += ["by", quote(s.actor)]
    words += ["->", s.effect]
    if s.score_low is not None:
        words += ["score", format_number(s.score_low)]
        if s.score_high is not None and s.score_high != s.score_low:
            words += ["..", format_number(s.score_high)]
    if s.with_obligations:
        words += ["with", _obligations(s.with_obligations)]
    if s.without_obligations:
        words += ["without", _obligations(s.without_obligations)]
    return " ".join(words)


def _layout(item: A.Item) -> _Layout:
    match item:
        case A.Include(path=path):
            return _Layout(f"include {quote(path)}", False)
        case A.Resolve(strategy=strategy, options=options):
            opts = "".join(f" {o.name} {format_expr(o.value)}" for o in options)
            return _Layout(f"resolve {strategy}{opts}", False)
        case A.Const(name=name, value=value):
            return _Layout(f"const {name} = {format_expr(value)}", False)
        case A.Sources(name=name, patterns=patterns, kind=kind):
            return _Layout(f"{kind} {name} = [{', '.join(map(quote, patterns))}]", False)
        case A.Policy():
            return _policy(item)
        case A.Test(name=name, stmts=stmts):
            kids = [_kid([s.span], [_stmt(s)]) for s in stmts]
            return _Layout(f"test {quote(name)}", True, kids)
    raise TypeError(f"not an item: {item!r}")


# ---------------------------------------------------------------- comments
@dataclass(frozen=True, slots=True)
class Comment:
    line: int
    text: str
    own_line: bool  # nothing but whitespace before it on its line


_SCAN = re.compile(r'"(?:[^"\\\n]|\\.)*"|(?:#|//)[^\n]*')


def scan_comments(text: str) -> list[Comment]:
    """Every `#`/`//` comment outside strings, with its line."""
    out = []
    for m in _SCAN.finditer(text):
        if m.group().startswith('"'):
            continue
        line = text.count("\n", 0, m.start()) + 1
        before = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
        out.append(Comment(line, m.group().rstrip(), not before.strip()))
    return out


@dataclass
class _Notes:
    """Comments hung on output places; keys: item index, (item, kid), (item, "head"…)."""

    leading: dict[object, list[Comment]] = field(default_factory=dict)
    trailing: dict[object, list[str]] = field(default_factory=dict)
    eof: list[Comment] = field(default_factory=list)
    blank: frozenset[int] = frozenset()  # source lines that are empty

    def lead(self, key: object, c: Comment) -> None:
        self.leading.setdefault(key, []).append(c)

    def trail(self, key: object, c: Comment) -> None:
        self.trailing.setdefault(key, []).append(c.text)

    def tail(self, key: object) -> str:
        texts = self.trailing.get(key)
        return "  " + " ".join(texts) if texts else ""

    def gap(self, a: int, b: int) -> bool:
        """Was there an empty line strictly between source lines a and b?"""
        return any(n in self.blank for n in range(a + 1, b))


def _attach(items: tuple[A.Item, ...], layouts: list[_Layout], text: str) -> _Notes:
    lines = text.split("\n")
    notes = _Notes(blank=frozenset(n for n, s in enumerate(lines, 1) if not s.strip()))
    for c in scan_comments(text):
        i = next(
            (k for k, it in enumerate(items) if it.span.line <= c.line <= it.span.end_line), None
        )
        if i is None:
            nxt = next((k for k, it in enumerate(items) if it.span.line > c.line), None)
            if nxt is None:
                notes.eof.append(c)
            else:
                notes.lead(nxt, c)
            continue
        span, lay = items[i].span, layouts[i]
        inside = next((j for j, k in enumerate(lay.kids) if k.start <= c.line <= k.end), None)
        if c.own_line:
            after = next((j for j, k in enumerate(lay.kids) if k.start > c.line), None)
            j = inside if inside is not None else after
            if not lay.block:
                notes.lead(i, c)
            elif j is not None:
                notes.lead((i, j), c)
            else:
                notes.lead((i, "end"), c)
        elif not lay.block or c.line == span.line:
            notes.trail((i, "head"), c)
        elif inside is not None:
            notes.trail((i, inside), c)
        elif c.line == span.end_line:
            notes.trail((i, "close"), c)
        else:
            notes.trail((i, "head"), c)
    return notes


# ---------------------------------------------------------------- rendering
def _render(items: tuple[A.Item, ...], layouts: list[_Layout], notes: _Notes) -> str:
    out: list[str] = []
    prev: A.Item | None = None
    for i, (item, lay) in enumerate(zip(items, layouts, strict=True)):
        lead = notes.leading.get(i, [])
        if prev is not None:
            grouped = isinstance(prev, _GROUPED) and isinstance(item, _GROUPED)
            first = lead[0].line if lead else item.span.line
            if not grouped or (lead and notes.gap(prev.span.end_line, first)):
                out.append("")
        _comment_run(out, lead, item.span.line, notes)
        out.extend(_render_item(i, lay, notes))
        prev = item
    if notes.eof:
        if prev is not None and notes.gap(prev.span.end_line, notes.eof[0].line):
            out.append("")
        _comment_run(out, notes.eof, None, notes)
    return "\n".join(out).strip("\n") + "\n" if out else ""


def _comment_run(out: list[str], run: list[Comment], until: int | None, notes: _Notes) -> None:
    """Top-level comments, keeping one empty line where the source had some."""
    for k, c in enumerate(run):
        out.append(c.text)
        nxt = run[k + 1].line if k + 1 < len(run) else until
        if nxt is not None and notes.gap(c.line, nxt):
            out.append("")


def _render_item(i: int, lay: _Layout, notes: _Notes) -> list[str]:
    if not lay.block:
        return [lay.header + notes.tail((i, "head"))]
    end = notes.leading.get((i, "end"), [])
    if not lay.kids and not end:
        both = notes.trailing.get((i, "head"), []) + notes.trailing.get((i, "close"), [])
        return [f"{lay.header} {{}}" + ("  " + " ".join(both) if both else "")]
    out = [f"{lay.header} {{" + notes.tail((i, "head"))]
    for j, kid in enumerate(lay.kids):
        out.extend(INDENT + c.text for c in notes.leading.get((i, j), []))
        first, *rest = kid.lines
        out.append(INDENT + first + notes.tail((i, j)))
        out.extend(INDENT + r for r in rest)
    out.extend(INDENT + c.text for c in end)
    out.append("}" + notes.tail((i, "close")))
    return out


def format_module(module: A.Module) -> str:
    """Canonical text of a module (no comments: the AST holds none)."""
    layouts = [_layout(it) for it in module.items]
    return _render(module.items, layouts, _Notes())


def format_source(text: str, path: str = "<string>") -> tuple[str | None, list[Diagnostic]]:
    """Canonical text of a file with its comments; None if it has syntax errors."""
    text = source_text(text)  # as parse_source reads it: comments are found by position
    module, diags = parse_source(text, path)
    if has_errors(diags):
        return None, diags
    layouts = [_layout(it) for it in module.items]
    return _render(module.items, layouts, _attach(module.items, layouts, text)), diags
