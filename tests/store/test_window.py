"""The sliding-window counter's next change is exact to the float: the count (as
the stores compute it) is unchanged at every instant before it and the events in
the window differ at it; the language's copy of the rule gives the same instant."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from memlineage.store.window import change_of
from memlineage_dsl.horizon import window_change


def _in_window(times: list[float], window: float, at: float) -> list[float]:
    return [t for t in times if at - window < t <= at]


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(st.floats(1e9, 2e9), st.floats(0.0, 1e6)),
    st.sampled_from([1e-3, 0.1, 3600.0, 7 * 86400.0, 97455.21227656747]),
    st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=4),
    st.integers(1, 4),
    st.integers(0, 3),
)
def test_the_next_change_is_the_first_float_where_the_window_moves(
    base: float, window: float, offsets: list[float], ulps: int, pick: int
) -> None:
    times = sorted(base + o * window for o in offsets)
    edge = times[pick % len(times)] + window
    now = edge - ulps * math.ulp(edge)  # a few floats before an event leaves
    h = change_of(times, window, now)
    assert h == window_change(times, window, now)
    if math.isinf(h):
        return
    assert h > now
    before = math.nextafter(h, -math.inf)
    assert before <= now or _in_window(times, window, before) == _in_window(times, window, now)
    assert _in_window(times, window, h) != _in_window(times, window, now)


def test_an_event_leaves_where_the_subtraction_turns_not_where_the_sum_rounds() -> None:
    """Event times small against the window (a clock near its epoch, a manual clock in
    a simulation): `event + window` rounds a float away from where the event leaves."""
    for t, window in (
        (432959.64989327133, 604800.0),
        (3.9496340400074392, 97455.21227656747),
        (975595.0089287693, 634290.7756941133),
    ):
        h = change_of([t], window, t)
        assert h != t + window  # the plain sum would be off by a float here
        assert t <= h - window and not t <= math.nextafter(h, -math.inf) - window
        assert h == window_change([t], window, t)
