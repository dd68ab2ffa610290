"""Type inference for `.mlp` expressions: names, attributes, calls, operators.

Types are the plain strings of `schema` (`number`, `list<memory>`…). A name or
attribute that could not be resolved has type `any`, which is compatible with
everything, so one typo gives one diagnostic and not a cascade.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from . import ast as A
from . import schema as S
from .diagnostics import Diagnostic, SourceFile, did_you_mean
from .limits import CALLS_SOURCE, MAX_WINDOW

QUANTIFIERS = ("any", "all", "count", "min", "max", "sum")
ORDERED = (S.NUMBER, S.DURATION, S.TIME, S.STRING)
_AGGREGABLE = (S.NUMBER, S.DURATION, S.TIME)


def list_of(t: str) -> str:
    return f"list<{t}>"


def is_list(t: str) -> bool:
    return t.startswith("list<")


def elem(t: str) -> str:
    """Element type of a list type (`any` for anything else)."""
    return t[5:-1] if is_list(t) else S.ANY


def compatible(a: str, b: str) -> bool:
    """Whether values of types `a` and `b` may be compared with `==`.

    A creator stands for its id (`refresh(memory.creator)`), so it is
    compatible with a string.
    """
    if a == b or S.ANY in (a, b):
        return True
    if {a, b} == {S.STRING, S.CREATOR}:
        return True
    if is_list(a) and is_list(b):
        return compatible(elem(a), elem(b))
    return False


def assignable(actual: str, expected: str) -> bool:
    """Whether a value of type `actual` may be passed where `expected` is wanted."""
    return expected == S.ANY or compatible(actual, expected)


@dataclass
class Names:
    """What a bare name may refer to in one context (policy, const, test)."""

    consts: Collection[str]
    const_type: Callable[[str], str]
    sources: Collection[str]
    roots: bool = True

    def visible(self, vars: Collection[str]) -> set[str]:
        pool = set(self.consts) | set(self.sources) | set(vars) | set(S.SYMBOLS)
        if self.roots:
            pool |= set(S.ROOTS)
        return pool


@dataclass
class ExprChecker:
    """Infers expression types, appending diagnostics for every problem found."""

    src: SourceFile
    names: Names
    diags: list[Diagnostic] = field(default_factory=list)

    def error(self, code: str, span: A.Span, message: str, help: str | None = None) -> None:
        self.diags.append(self.src.diag(code, span, message, help))

    def expect(self, expr: A.Expr, want: str, what: str, vars: dict[str, str] | None = None) -> str:
        """Infer `expr` and report E201 unless it has type `want`."""
        got = self.infer(expr, vars or {})
        if not assignable(got, want):
            self.error(
                "E201", expr.span, f"{what} must be `{want}`, got `{got}`", _hint(want, got, expr)
            )
        return got

    # ------------------------------------------------------------------ infer
    def infer(self, expr: A.Expr, vars: dict[str, str]) -> str:
        method: Callable[[A.Expr, dict[str, str]], str] = getattr(
            self, f"_{type(expr).__name__.lower()}"
        )
        return method(expr, vars)

    def _number(self, e: A.Number, vars: dict[str, str]) -> str:
        return S.NUMBER

    def _duration(self, e: A.Duration, vars: dict[str, str]) -> str:
        return S.DURATION

    def _str(self, e: A.Str, vars: dict[str, str]) -> str:
        return S.STRING

    def _bool(self, e: A.Bool, vars: dict[str, str]) -> str:
        return S.BOOL

    def _now(self, e: A.Now, vars: dict[str, str]) -> str:
        return S.TIME

    def _name(self, e: A.Name, vars: dict[str, str], source_list: bool = False) -> str:
        if e.id in vars:
            return vars[e.id]
        if e.id in self.names.consts:
            return self.names.const_type(e.id)
        if e.id in self.names.sources:
            return S.SOURCES
        if self.names.roots and e.id in S.ROOTS:
            return S.ROOTS[e.id]
        if e.id in S.SYMBOLS:
            return S.STRING
        if source_list:
            hint = did_you_mean(e.id, self.names.sources) or did_you_mean(
                e.id, self.names.visible(vars)
            )
            self.error(
                "E104",
                e.span,
                f"unknown source list `{e.id}`",
                hint or 'define it with `sources NAME = ["tool:*"]`',
            )
            return S.ANY
        hint = did_you_mean(e.id, self.names.visible(vars))
        if e.id in S.EFFECTS:
            hint = f"`{e.id}` is an effect: is the condition before it unfinished?"
        elif hint is None and e.id in S.ROOTS:
            hint = f"`{e.id}` is not available here"
        self.error("E101", e.span, f"unknown name `{e.id}`", hint)
        return S.ANY

    def _attr(self, e: A.Attr, vars: dict[str, str]) -> str:
        obj = self.infer(e.obj, vars)
        if obj == S.ANY:
            return S.ANY
        table = S.ATTRS_BY_TYPE.get(obj)
        if table is None:
            self.error(
                "E102",
                e.name_span,
                f"`{obj}` has no attribute `{e.name}`",
                "only memories, creators and the request have attributes",
            )
            return S.ANY
        spec = table.get(e.name)
        if spec is None:
            self.error(
                "E102",
                e.name_span,
                f"unknown attribute `{e.name}` on `{obj}`",
                did_you_mean(e.name, table),
            )
            return S.ANY
        return spec.type

    def _call(self, e: A.Call, vars: dict[str, str]) -> str:
        args = [self.infer(a, vars) for a in e.args]
        spec = S.FUNCTIONS.get(e.func)
        if spec is None:
            hint = did_you_mean(e.func, S.FUNCTIONS)
            quant = did_you_mean(e.func, QUANTIFIERS)
            if hint is None and quant:
                hint = f"{quant} a quantifier reads `any(x in list : cond)`"
            self.error("E103", e.func_span, f"unknown function `{e.func}`", hint)
            return S.ANY
        most, least = len(spec.params), len(spec.params) - spec.optional
        if not least <= len(args) <= most:
            want = f"{least} to {most}" if least != most else str(most)
            plural = "" if most == 1 and least == most else "s"
            self.error(
                "E105",
                e.span,
                f"`{e.func}` takes {want} argument{plural}, got {len(args)}",
                f"`{e.func}`: {spec.doc}",
            )
            return spec.returns
        for arg, got, want in zip(e.args, args, spec.params, strict=False):
            if want == S.ANY:  # `len`: any list or string
                if not (is_list(got) or got in (S.STRING, S.ANY)):
                    self.error(
                        "E201", arg.span, f"`{e.func}` needs a list or a string, got `{got}`"
                    )
            elif want == S.PATTERN:  # `acts`: counted by pattern, so known when compiled
                if not self._constant_pattern(arg):
                    self.error(
                        "E201",
                        arg.span,
                        f"the first argument of `{e.func}` must be a string constant or a "
                        "named list",
                        'e.g. `acts("send_money", 1h)` or `acts(money_out, 1h)` after '
                        '`actions money_out = ["send_*"]`',
                    )
            elif want == S.ORIGIN_OF:
                if got not in (S.ARGUMENT, S.MEMORY, S.ANY):
                    self.error(
                        "E201",
                        arg.span,
                        f"argument of `{e.func}` must be an argument or a memory, got `{got}`",
                    )
            elif not assignable(got, want):
                self.error(
                    "E201",
                    arg.span,
                    f"argument of `{e.func}` must be `{want}`, got `{got}`",
                    _hint(want, got, arg),
                )
            elif want == S.DURATION and e.func in ("calls", "acts"):
                window = self._literal(arg)  # written, or the const it names
                if isinstance(window, A.Duration) and not 0 < window.seconds <= MAX_WINDOW:
                    # a window the sidecar's counters cannot answer fails every decision
                    self.error(
                        "E203",
                        arg.span,
                        f"the window of `{e.func}` must be more than 0 and at most 7d "
                        "(the sidecar keeps 7 days of counted events)",
                    )
            elif want == S.STRING and e.func == "calls":
                source = self._literal(arg)
                if isinstance(source, A.Str) and not CALLS_SOURCE.fullmatch(source.value):
                    glob = any(c in source.value for c in "*?[")
                    self.error(
                        "E203",
                        arg.span,
                        "`calls` counts one exact source: "
                        + (
                            "a glob is not counted"
                            if glob
                            else "an id of 1 to 122 letters, digits or `._:/-`"
                        ),
                        'e.g. `calls("tool:flight_api", 1h)`, or `calls(memory.creator, 1h)`',
                    )
        return spec.returns

    def _literal(self, e: A.Expr) -> A.Expr:
        """`e`, or the expression of the const it names (and so on): what a literal
        check can look at."""
        consts = self.names.consts
        for _ in range(64):  # a const cycle is reported elsewhere
            if not (isinstance(e, A.Name) and isinstance(consts, Mapping) and e.id in consts):
                break
            e = consts[e.id].node.value
        return e

    def _constant_pattern(self, e: A.Expr) -> bool:
        """A string literal, a named source/action list, or a const holding a string."""
        if isinstance(e, A.Str):
            return True
        if isinstance(e, A.Name):
            if e.id in self.names.sources:
                return True
            if e.id in self.names.consts:
                return self.names.const_type(e.id) == S.STRING  # consts read no request
        return False

    def _quant(self, e: A.Quant, vars: dict[str, str]) -> str:
        coll = self.infer(e.collection, vars)
        if coll != S.ANY and not is_list(coll):
            self.error(
                "E201",
                e.collection.span,
                f"`{e.kind}` needs a list to range over, got `{coll}`",
                "e.g. `ancestors(memory)` or `memory.tags`",
            )
        body = self.infer(e.body, {**vars, e.var: elem(coll)})
        if e.kind in ("any", "all", "count"):
            if not assignable(body, S.BOOL):
                self.error(
                    "E201", e.body.span, f"the body of `{e.kind}` must be `bool`, got `{body}`"
                )
            return S.NUMBER if e.kind == "count" else S.BOOL
        if body not in (*_AGGREGABLE, S.ANY):
            self.error(
                "E201",
                e.body.span,
                f"the body of `{e.kind}` must be a number, duration or time, got `{body}`",
            )
            return S.ANY
        return body

    def _listlit(self, e: A.ListLit, vars: dict[str, str]) -> str:
        first = S.ANY
        for item in e.items:
            t = self.infer(item, vars)
            if first == S.ANY:
                first = t
            elif not compatible(first, t):
                self.error("E201", item.span, f"list items must have one type: `{first}` and `{t}`")
        return list_of(first)

    def _unary(self, e: A.Unary, vars: dict[str, str]) -> str:
        t = self.infer(e.operand, vars)
        if e.op == "not":
            if not assignable(t, S.BOOL):
                self.error("E201", e.operand.span, f"`not` needs a `bool`, got `{t}`")
            return S.BOOL
        if t not in (S.NUMBER, S.DURATION, S.ANY):
            self.error("E201", e.span, f"cannot negate `{t}`")
            return S.ANY
        return t

    def _cond(self, e: A.Cond, vars: dict[str, str]) -> str:
        test = self.infer(e.test, vars)
        if not assignable(test, S.BOOL):
            self.error("E201", e.test.span, f"the `if` condition must be `bool`, got `{test}`")
        a, b = self.infer(e.then, vars), self.infer(e.otherwise, vars)
        if not compatible(a, b):
            self.error("E201", e.span, f"`if` branches have different types: `{a}` and `{b}`")
            return S.ANY
        return b if a == S.ANY else a

    def _binary(self, e: A.Binary, vars: dict[str, str]) -> str:
        op = e.op
        if op in ("and", "or"):
            for side in (e.left, e.right):
                t = self.infer(side, vars)
                if not assignable(t, S.BOOL):
                    self.error("E201", side.span, f"`{op}` needs `bool` operands, got `{t}`")
            return S.BOOL
        left = self.infer(e.left, vars)
        is_set_op = op in ("in", "not in", "matches")
        if is_set_op and isinstance(e.right, A.Name):
            right = self._name(e.right, vars, source_list=True)
        else:
            right = self.infer(e.right, vars)
        if S.ANY in (left, right) and op not in ("+", "-", "*", "/"):
            return S.BOOL
        if op in ("==", "!="):
            if not compatible(left, right):
                self._mismatch(e, left, right)
            return S.BOOL
        if op in ("<", "<=", ">", ">="):
            if left != right or left not in ORDERED:
                if left == right:
                    self.error("E201", e.span, f"cannot order `{left}` values with `{op}`")
                else:
                    self._mismatch(e, left, right)
            return S.BOOL
        if op in ("in", "not in"):
            self._check_in(e, left, right)
            return S.BOOL
        if op == "matches":
            ok = left in (S.STRING, S.CREATOR) and (
                right in (S.STRING, S.SOURCES) or compatible(right, S.LIST_STRING)
            )
            if not ok:
                self.error(
                    "E201",
                    e.span,
                    f"cannot match `{left}` against `{right}`",
                    "`matches` takes a string and a glob or a source list, "
                    'e.g. `memory.creator.id matches "tool:*"`',
                )
            return S.BOOL
        return self._arith(e, left, right)

    def _check_in(self, e: A.Binary, left: str, right: str) -> None:
        if right == S.SOURCES or right == S.STRING:
            ok = left in (S.STRING, S.CREATOR)
        elif is_list(right):
            ok = compatible(left, elem(right))
        else:
            ok = False
        if not ok:
            self.error(
                "E201",
                e.span,
                f"cannot test `{left}` {e.op} `{right}`",
                "`in` takes a value and a list of such values, a source list or a string",
            )

    def _arith(self, e: A.Binary, left: str, right: str) -> str:
        if S.ANY in (left, right):
            known = right if left == S.ANY else left
            return known if e.op in ("+", "-") and known != S.TIME else S.ANY
        result = _ARITH_RULES.get((left, e.op, right))
        if result is None:
            self.error(
                "E201",
                e.span,
                f"cannot apply `{e.op}` to `{left}` and `{right}`",
                _arith_hint(left, e.op, right),
            )
            return S.ANY
        return result

    def _mismatch(self, e: A.Binary, left: str, right: str) -> None:
        self.error(
            "E201", e.span, f"cannot compare `{left}` with `{right}`", _compare_hint(left, right, e)
        )


_N, _D, _T = S.NUMBER, S.DURATION, S.TIME
_ARITH_RULES: dict[tuple[str, str, str], str] = {
    **{(_N, op, _N): _N for op in "+-*/"},
    (_T, "-", _T): _D,
    (_T, "+", _D): _T,
    (_D, "+", _T): _T,
    (_T, "-", _D): _T,
    (_D, "+", _D): _D,
    (_D, "-", _D): _D,
    (_D, "*", _N): _D,
    (_N, "*", _D): _D,
    (_D, "/", _N): _D,
    (_D, "/", _D): _N,
    (S.STRING, "+", S.STRING): S.STRING,  # concatenation, e.g. annotate("by " + m.successor)
}


def _compare_hint(left: str, right: str, e: A.Binary) -> str | None:
    if {left, right} == {S.DURATION, S.NUMBER}:
        return "write the number with a unit, e.g. `5m`"
    if {left, right} == {S.DURATION, S.TIME}:
        return (
            "compare a duration with a duration (`age(memory) > 1h`) "
            "or a time with a time (`memory.created_at < now - 1h`)"
        )
    if {left, right} == {S.STRING, S.NUMBER}:
        for side in (e.left, e.right):
            if isinstance(side, A.Str) and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", side.value):
                return f"remove the quotes: `{side.value}`"
        return None
    return None


def _hint(want: str, got: str, expr: A.Expr) -> str | None:
    if {want, got} == {S.DURATION, S.NUMBER}:
        if want == S.DURATION:
            return "write the number with a unit, e.g. `5m`"
        return "write a plain number, without a unit"
    if (
        want == S.NUMBER
        and got == S.STRING
        and isinstance(expr, A.Str)
        and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", expr.value)
    ):
        return f"remove the quotes: `{expr.value}`"
    if want == S.BOOL:
        return "a condition is a comparison, a test such as `unknown(memory)`, or `true`"
    return None


def _arith_hint(left: str, op: str, right: str) -> str | None:
    if {left, right} == {S.DURATION, S.NUMBER} and op in ("+", "-"):
        return "write the number with a unit, e.g. `5m`"
    if left == S.TIME and right == S.TIME and op == "+":
        return "subtract two times to get a duration"
    if S.STRING in (left, right):
        return "strings only concatenate with strings (`+`)"
    return None
