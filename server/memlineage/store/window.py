"""The stores' sliding-window event counter: how many events of a name fall in
``(now - window, now]`` and the instant that count next changes.

One rule, owned here by the stores: the count changes when the oldest event in the
window leaves it (its time + ``window``) or when the first event after ``now``
comes in, whichever is first (``math.inf``: never, no event being added).  The
embedded store applies it to its sorted list of times (``count_in`` /
``change_of``); Redis reads the oldest-in-window and first-later events from its
sorted set and combines them with ``next_change``.

The policy language's ``horizon.window_change`` (in policy_dsl) is the language's
own view of the same rule; the stores must not import the language, so each side
keeps its copy: keep the two in agreement.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence


def count_in(times: Sequence[float], since: float, now: float) -> int:
    """Events of the sorted ``times`` in ``(since, now]``."""
    return bisect.bisect_right(times, now) - bisect.bisect_right(times, since)


def leaves_at(event: float, window: float) -> float:
    """The first instant ``h`` at which ``event`` is out of ``(h - window, h]``, as the
    count computes it (``event <= h - window`` in floats): ``event + window`` rounded,
    moved to the float where the comparison really turns (an ulp either way)."""
    h = event + window
    if math.isinf(h):
        return h
    while not event <= h - window:
        h = math.nextafter(h, math.inf)
    while event <= (before := math.nextafter(h, -math.inf)) - window:
        h = before
    return h


def next_change(oldest: float | None, later: float | None, window: float) -> float:
    """When the count next changes: ``oldest`` (the oldest event in the window) leaves
    (``leaves_at``), ``later`` (the first event after now) enters at its time."""
    leaves = leaves_at(oldest, window) if oldest is not None else math.inf
    enters = later if later is not None else math.inf
    return min(leaves, enters)


def change_of(times: Sequence[float], window: float, now: float) -> float:
    """``next_change`` for the sorted event ``times`` (``math.inf`` when empty)."""
    lo = bisect.bisect_right(times, now - window)
    hi = bisect.bisect_right(times, now)
    return next_change(
        times[lo] if lo < hi else None, times[hi] if hi < len(times) else None, window
    )
