"""Constant folding: replace const names by their literal values.

The checker needs it for `priority`/`weight` (which must be constants) and the
rule analysis needs it so `memory.confidence > min_conf` compares like a
literal. Folding never fails: whatever cannot be folded is returned as is.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import ast as A

Literal = A.Number | A.Duration | A.Str | A.Bool
_ARITH = ("+", "-", "*", "/")


def is_literal(expr: A.Expr) -> bool:
    return isinstance(expr, A.Number | A.Duration | A.Str | A.Bool)


def literal_value(expr: A.Expr) -> float | str | bool | None:
    """The Python value of a literal node (durations in seconds), else None."""
    if isinstance(expr, A.Number):
        return expr.value
    if isinstance(expr, A.Duration):
        return expr.seconds
    if isinstance(expr, A.Str):
        return expr.value
    if isinstance(expr, A.Bool):
        return expr.value
    return None


class Folder:
    """Folds expressions against a table of const definitions (name -> value expr)."""

    def __init__(self, consts: Mapping[str, A.Expr]) -> None:
        self.consts = consts
        self._cache: dict[str, A.Expr] = {}
        self._active: set[str] = set()

    def const(self, name: str) -> A.Expr | None:
        """The folded value of const `name`; None if unknown or cyclic."""
        if name in self._cache:
            return self._cache[name]
        if name not in self.consts or name in self._active:
            return None
        self._active.add(name)
        try:
            value = self.fold(self.consts[name], bound=frozenset())
        finally:
            self._active.discard(name)
        self._cache[name] = value
        return value

    def fold(self, expr: A.Expr, bound: frozenset[str] = frozenset()) -> A.Expr:
        """Fold `expr`; names in `bound` (quantifier variables) are left alone."""
        if isinstance(expr, A.Name):
            if expr.id in bound:
                return expr
            value = self.const(expr.id)
            return expr if value is None else value
        if isinstance(expr, A.Unary):
            inner = self.fold(expr.operand, bound)
            if expr.op == "-" and isinstance(inner, A.Number):
                return A.Number(-inner.value, span=expr.span)
            if expr.op == "-" and isinstance(inner, A.Duration):
                return A.Duration(-inner.seconds, span=expr.span)
            if expr.op == "not" and isinstance(inner, A.Bool):
                return A.Bool(not inner.value, span=expr.span)
            return A.Unary(expr.op, inner, span=expr.span)
        if isinstance(expr, A.Binary):
            left, right = self.fold(expr.left, bound), self.fold(expr.right, bound)
            return fold_binary(expr, left, right)
        if isinstance(expr, A.Attr):
            return A.Attr(
                self.fold(expr.obj, bound), expr.name, span=expr.span, name_span=expr.name_span
            )
        if isinstance(expr, A.Call):
            args = tuple(self.fold(a, bound) for a in expr.args)
            return A.Call(expr.func, args, span=expr.span, func_span=expr.func_span)
        if isinstance(expr, A.Quant):
            inner_bound = bound | {expr.var}
            return A.Quant(
                expr.kind,
                expr.var,
                self.fold(expr.collection, bound),
                self.fold(expr.body, inner_bound),
                span=expr.span,
            )
        if isinstance(expr, A.ListLit):
            return A.ListLit(tuple(self.fold(i, bound) for i in expr.items), span=expr.span)
        if isinstance(expr, A.Cond):
            test = self.fold(expr.test, bound)
            then, other = self.fold(expr.then, bound), self.fold(expr.otherwise, bound)
            if isinstance(test, A.Bool):
                return then if test.value else other
            return A.Cond(test, then, other, span=expr.span)
        return expr


def fold_binary(expr: A.Binary, left: A.Expr, right: A.Expr) -> A.Expr:
    """Fold arithmetic on literals of matching kinds; leave anything else unfolded."""
    span = expr.span
    op = expr.op
    if op in ("and", "or") and isinstance(left, A.Bool):
        if op == "and":
            return right if left.value else A.Bool(False, span=span)
        return A.Bool(True, span=span) if left.value else right
    if (
        op in _ARITH
        and isinstance(left, A.Number | A.Duration)
        and isinstance(right, A.Number | A.Duration)
    ):  # no other literal is arithmetic
        lv = left.value if isinstance(left, A.Number) else left.seconds
        rv = right.value if isinstance(right, A.Number) else right.seconds
        both_num = isinstance(left, A.Number) and isinstance(right, A.Number)
        both_dur = isinstance(left, A.Duration) and isinstance(right, A.Duration)
        try:
            if both_num:
                return A.Number(_arith(op, lv, rv), span=span)
            if both_dur and op in ("+", "-"):
                return A.Duration(_arith(op, lv, rv), span=span)
            if both_dur and op == "/":
                return A.Number(_arith(op, lv, rv), span=span)
            if isinstance(left, A.Duration) and isinstance(right, A.Number) and op in ("*", "/"):
                return A.Duration(_arith(op, lv, rv), span=span)
            if isinstance(left, A.Number) and isinstance(right, A.Duration) and op == "*":
                return A.Duration(_arith(op, lv, rv), span=span)
        except ZeroDivisionError:
            pass
    return A.Binary(op, left, right, span=span)


def _arith(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    return a / b
