"""Faults of background flushes, logged once and then at most once a minute while they
last: a namespace whose stored data is damaged fails every flush (about once a second)
until an operator mends it, and one ERROR line a second would bury everything else."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

REPEAT_SECONDS = 60.0


class FaultLog:
    """ERROR the first time a fault (by key: what failed, e.g. a namespace) is seen and
    whenever its cause changes; while the same cause repeats, one ERROR per `repeat`
    seconds saying how many times it failed meanwhile; INFO once it is gone
    (`cleared`)."""

    def __init__(
        self,
        log: logging.Logger,
        repeat: float = REPEAT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._repeat = repeat
        self._clock = clock
        self._lock = threading.Lock()
        self._open: dict[str, tuple[str, float, int]] = {}  # key -> (cause, logged at, since)

    def failed(self, key: str, cause: str, message: str) -> None:
        """`key` failed for `cause` (what stays the same while the fault lasts, e.g. the
        store's error); `message` is the line to log (it may hold counts)."""
        now = self._clock()
        with self._lock:
            seen = self._open.get(key)
            if seen is not None and seen[0] == cause and now - seen[1] < self._repeat:
                self._open[key] = (cause, seen[1], seen[2] + 1)
                return
            self._open[key] = (cause, now, 0)
        if seen is not None and seen[0] == cause:
            self._log.error("%s (failed %d more times since the last report)", message, seen[2])
        else:
            self._log.error("%s", message)

    def cleared(self, key: str, message: str) -> None:
        """`key` went through: say so once, if it had failed."""
        with self._lock:
            seen = self._open.pop(key, None)
        if seen is not None:
            self._log.info("%s", message)


__all__ = ["REPEAT_SECONDS", "FaultLog"]
