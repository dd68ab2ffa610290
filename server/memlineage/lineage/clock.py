"""Injectable time: the store never reads the wall clock except through a Clock.

Tests and simulations pass a :class:`ManualClock` and never sleep; decisions can
be replayed with the request's own time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Clock = Callable[[], float]
"""A callable returning the current time as float epoch seconds."""


def system_clock() -> float:
    """The production clock (wall time, epoch seconds)."""
    return time.time()


class ManualClock:
    """A clock that only moves when told to (thread-safe)."""

    def __init__(self, start: float = 1_700_000_000.0):
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, now: float) -> None:
        with self._lock:
            self._now = float(now)

    def advance_to(self, at: float) -> float:
        """Move forward to `at` and return it; a time before the clock raises
        ValueError (the clock never goes back), so concurrent callers of a simulation
        can only push it forward, atomically."""
        with self._lock:
            if at < self._now:
                raise ValueError(f"{at!r} is before the clock ({self._now!r})")
            self._now = float(at)
            return self._now
