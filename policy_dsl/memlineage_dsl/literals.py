"""Numbers as a policy writes them, for the checker: a literal that reads as inf
(`1e309`), a literal's magnitude, and a bound printed as written (`3`, not `3.0`)."""

from __future__ import annotations

import math

from . import ast as A
from .limits import walk


def infinite(value: A.Expr | None) -> bool:
    return isinstance(value, A.Number | A.Duration) and not math.isfinite(
        value.value if isinstance(value, A.Number) else value.seconds
    )


def magnitude(value: A.Expr | None) -> float:
    if isinstance(value, A.Number):
        return value.value
    return value.seconds if isinstance(value, A.Duration) else 0.0


def has_infinite_literal(expr: A.Expr) -> bool:
    """Whether `expr` writes a literal that reads as inf (reported on its own)."""
    return any(
        (isinstance(n, A.Number) and not math.isfinite(n.value))
        or (isinstance(n, A.Duration) and not math.isfinite(n.seconds))
        for n, _ in walk(expr)
    )


def num(v: float) -> str:
    if not math.isfinite(v):
        return repr(v)
    return str(int(v)) if v == int(v) else repr(v)
