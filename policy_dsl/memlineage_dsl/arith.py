"""Arithmetic of constants that cannot work: found when the set is checked.

A division by a divisor that is zero whatever the request (`x / Z` after
`const Z = 0`, `age(memory) / 0s`), a `min`/`max` of an empty list literal, or
a computation of constants that overflows (`1e308 * 10`, NaN) used to pass lint:
the first two failed their rule at run time for every request that reached them,
the last compared with infinity or NaN (a `deny` that never fired).

`faults` returns each such place. One the evaluation always reaches is an error
(E203); one it reaches only for some requests (a branch of `if`, the right of
`and`/`or`, a quantifier's body) a warning (W407): that rule fails closed for
those requests only, the rest decide normally. An overflow is an error wherever
it is: it is a wrong value, not a failure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from . import ast as A
from .fold import fold_binary
from .literals import magnitude

_ARITH = ("+", "-", "*", "/")
NumLit = A.Number | A.Duration


@dataclass(frozen=True, slots=True)
class Fault:
    node: A.Expr  # where it is written
    message: str
    help: str
    always: bool  # reached by every evaluation of the expression
    overflow: bool


def faults(expr: A.Expr, const: Callable[[str], A.Expr | None]) -> list[Fault]:
    """The arithmetic faults of `expr`, `const(name)` giving a const's folded value.
    Recursive: the parser and `pipeline.inlined_depth` bound the depth."""
    out: list[Fault] = []

    def visit(e: A.Expr, bound: frozenset[str], always: bool) -> NumLit | None:
        """`e`'s value when it is a number or duration of constants, else None."""
        if isinstance(e, A.Number | A.Duration):
            return e
        if isinstance(e, A.Name):
            value = None if e.id in bound else const(e.id)
            return value if isinstance(value, A.Number | A.Duration) else None
        if isinstance(e, A.Unary):
            inner = visit(e.operand, bound, always)
            if e.op == "-" and isinstance(inner, A.Number):
                return A.Number(-inner.value, span=e.span)
            if e.op == "-" and isinstance(inner, A.Duration):
                return A.Duration(-inner.seconds, span=e.span)
            return None
        if isinstance(e, A.Binary):
            left = visit(e.left, bound, always)
            # `and` / `or` short-circuit: the right is evaluated for some requests only
            right = visit(e.right, bound, always and e.op not in ("and", "or"))
            if e.op not in _ARITH:
                return None
            if e.op == "/" and right is not None and magnitude(right) == 0:
                out.append(
                    Fault(
                        e.right,
                        "division by zero: this divisor is 0 whatever the request",
                        "divide by a number other than 0, or test it first",
                        always,
                        False,
                    )
                )
                return None
            if left is None or right is None:
                return None
            folded = fold_binary(e, left, right)
            if not isinstance(folded, A.Number | A.Duration):
                return None
            if not math.isfinite(magnitude(folded)) and (
                math.isfinite(magnitude(left)) and math.isfinite(magnitude(right))
            ):
                out.append(
                    Fault(
                        e,
                        f"this computation of constants overflows: it evaluates to "
                        f"{magnitude(folded)!r}",
                        "numbers must be finite (at most about 1.8e308)",
                        always,
                        True,
                    )
                )
                return None
            return folded
        if isinstance(e, A.Cond):
            visit(e.test, bound, always)
            visit(e.then, bound, False)
            visit(e.otherwise, bound, False)
            return None
        if isinstance(e, A.Quant):
            visit(e.collection, bound, always)
            visit(e.body, bound | {e.var}, False)
            coll = e.collection
            if e.kind in ("min", "max") and isinstance(coll, A.ListLit) and not coll.items:
                out.append(
                    Fault(
                        e,
                        f"`{e.kind}` of an empty list has no value",
                        "range over a list with items (`lineage(m)` is never empty)",
                        always,
                        False,
                    )
                )
            return None
        if isinstance(e, A.Attr):
            visit(e.obj, bound, always)
        elif isinstance(e, A.Call):
            for arg in e.args:
                visit(arg, bound, always)
        elif isinstance(e, A.ListLit):
            for item in e.items:
                visit(item, bound, always)
        return None

    visit(expr, frozenset(), True)
    return out
