"""How long a decision stays true as time passes, with nothing else changing.

A decision depends on time only through the comparisons it evaluated whose one
side moves with the clock (`age(m) > 1h`, `memory.reliability < 0.3`, ...) and
through `calls(source, window)` counts. The generated code reports each such
comparison here (`note`); the snapshot keeps the earliest instant at which any
of them could change its truth value: the decision's *horizon*. Until then,
with the same lineage, the same request gives the same decision, so a server
may reuse it (`memlineage.engine` does, for stores that tell it of every write).

Kinds of time-dependent values:
- `LIN`: grows by one second per second (`now`, `request.time`, `age()`, `since()`,
  and those plus or minus a time-independent value) — exact crossing time;
- `REL`: reliability: never rises with time, and falls no faster than the
  shortest configured half-life — a lower bound of the crossing time;
- `VAL`: value score: never rises with time, and loses at most
  beta * (1 - exp(-lambda * dt)) in dt — a lower bound of the crossing time.
Anything else that varies with time (`age(m) * 2`, `max(...)` of ages, a cost
computed from an age) is *opaque*: the compiler marks its policy as not
time-exact, and no decision of its operation is reused.
"""

from __future__ import annotations

import bisect
import math
from typing import TypeGuard

LIN = "lin"
REL = "rel"
VAL = "val"
OPAQUE = "opaque"
MOVING = (LIN, REL, VAL)  # a comparison against a fixed value can be tracked
MARGIN = 1e-3  # seconds: a crossing is never trusted to the last float bit


def crossing(
    kind: str,
    q: object,
    c: object,
    now: float,
    half_life_min: float,
    value_decay: tuple[float, float] | None,
) -> float:
    """The earliest instant at which `q OP c` may change truth value, for any OP,
    given that `q` is of `kind` and `c` does not move (math.inf: never).

    Never before `now`: `now` itself when any move at all may flip it (or nothing
    can be said), else an instant after `now` (see `_after`)."""
    if not (_is_number(q) and _is_number(c)):
        return now  # not numbers: no reasoning, no reuse
    if q != q or c != c:  # NaN stays NaN as time passes: every comparison stays as it is
        return math.inf
    if q == c:
        return now  # any move at all flips `==`, `<=` or `>=`
    if kind == LIN:  # rises: only a value still below c will meet it
        return _after(now, now + (c - q) - MARGIN) if q < c else math.inf
    if q < c:  # REL, VAL: never rise, so a value below c stays below
        return math.inf
    if kind == REL:
        if c < 0 or half_life_min == math.inf:
            return math.inf
        if not half_life_min > 0:
            return now
        if c == 0:  # halving reaches 0.0 too, when the float underflows (below 2**-1074;
            # a few half-lives early: the decay an exp of its own may round sooner)
            return _after(now, now + half_life_min * (math.log2(q) + 1070) - MARGIN)
        return _after(now, now + half_life_min * math.log2(q / c) - MARGIN)
    if kind == VAL:
        if value_decay is None:
            return now
        beta, lam = value_decay
        gap = q - c
        if gap >= beta or lam <= 0:
            return math.inf
        return _after(now, now - math.log1p(-gap / beta) / lam - MARGIN)
    return now


def _is_number(x: object) -> TypeGuard[float]:
    return type(x) in (int, float)  # exactly: a bool is not a number here


def _after(now: float, instant: float) -> float:
    """`instant`, or the next float after `now` when it is not later than `now`.

    The comparison was just evaluated at `now` and q != c, so its truth value is
    fixed at `now` itself and changes, if at all, strictly after it. A crossing
    nearer than MARGIN (`age(m) < 0.5ms`, a reliability a hair above its bound)
    would otherwise land at or before `now`: a horizon in the past. The next
    float keeps the decision valid at exactly `now` and not one tick later."""
    return instant if instant > now else math.nextafter(now, math.inf)


def window_change(times: list[float], window: float, now: float) -> float:
    """When a count of the sorted event `times` in `(now - window, now]` next changes,
    no event being added: its oldest event leaves, or a later one comes in."""
    lo = bisect.bisect_right(times, now - window)
    hi = bisect.bisect_right(times, now)
    leaves = _leaves_at(times[lo], window) if lo < hi else math.inf
    enters = times[hi] if hi < len(times) else math.inf
    return min(leaves, enters)


def _leaves_at(event: float, window: float) -> float:
    """The first float `h` with `event <= h - window` (the count's own comparison):
    `event + window` rounded, moved an ulp either way to where it really turns."""
    h = event + window
    if math.isinf(h):
        return h
    while not event <= h - window:
        h = math.nextafter(h, math.inf)
    while event <= (before := math.nextafter(h, -math.inf)) - window:
        h = before
    return h
