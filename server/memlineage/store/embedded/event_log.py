"""The embedded store's lineage-event reads: a namespace's retained events after a
cursor (``_events``), the long poll on the store's condition (``_wait_events``) and the
latest cursor.  The events themselves are produced by the apply functions
(``state``); a mixin of ``EmbeddedStore`` (``store``), relying on the attributes its
``__init__`` sets.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from memlineage.lineage.errors import CursorExpiredError
from memlineage.lineage.model import LineageEvent
from memlineage.store.base import LineageStore
from memlineage.store.embedded.space import Space

_CURSOR_RE = re.compile(r"[0-9]{1,19}")


class Wakeups:
    """The readers waiting for events, one condition per namespace watched, all on the
    store's lock: a change wakes its namespace's readers only. With one condition for
    all, every write woke every waiting Watch stream of every namespace, each to take
    the store's lock again: one token's 64 idle streams slowed another tenant's writes
    by half (an outside audit). `with wakeups:` holds the lock."""

    __slots__ = ("_waiting", "lock")

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        # namespace -> [its condition, how many wait on it]; gone with its last reader
        self._waiting: dict[str, list[Any]] = {}

    def __enter__(self) -> Wakeups:
        self.lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    def wait(self, namespace: str, timeout: float) -> None:
        """Until a change in `namespace` or `timeout` (the caller holds the lock)."""
        entry = self._waiting.get(namespace)
        if entry is None:
            entry = self._waiting[namespace] = [threading.Condition(self.lock), 0]
        entry[1] += 1
        try:
            entry[0].wait(timeout)
        finally:  # the lock is held again here
            entry[1] -= 1
            if not entry[1]:
                del self._waiting[namespace]

    def notify(self, namespace: str) -> None:
        """Wake `namespace`'s readers (the caller holds the lock)."""
        entry = self._waiting.get(namespace)
        if entry is not None:
            entry[0].notify_all()


class EventLogMixin(LineageStore):
    """Cursor reads over each namespace's retained events; the attributes below are
    ``EmbeddedStore``'s."""

    _lock: threading.RLock
    _changed: Wakeups
    _spaces: dict[str, Space]

    def _parse_cursor(self, cursor: str) -> str | None:
        return str(int(cursor)) if _CURSOR_RE.fullmatch(cursor) else None

    def _events_locked(
        self, namespace: str, after: str | None, limit: int
    ) -> tuple[list[LineageEvent], str]:
        sp = self._spaces.get(namespace)
        seq = sp.seq if sp is not None else 0
        retained = len(sp.events) if sp is not None else 0
        first = seq - retained + 1  # sequence number of the oldest retained event
        if after is None:
            start = first
        else:
            position = int(after)
            if position > seq:
                raise CursorExpiredError(
                    f"cursor {after} is ahead of this namespace's log (at {seq}): the store "
                    "was reset or the cursor is not from it; re-sync"
                )
            if position < first - 1:
                raise CursorExpiredError(
                    f"events after cursor {after} were dropped (oldest retained is {first}); "
                    "re-sync"
                )
            start = position + 1
        if sp is None or start > seq:
            return [], str(seq) if after is None else after
        events = sp.events
        lo = start - first
        hi = min(lo + limit, retained)
        out = [events[i] for i in range(lo, hi)]
        return out, out[-1].cursor

    def _events(
        self, namespace: str, after: str | None, limit: int
    ) -> tuple[list[LineageEvent], str]:
        with self._lock:
            return self._events_locked(namespace, after, limit)

    def _wait_events(
        self, namespace: str, after: str | None, limit: int, timeout: float
    ) -> tuple[list[LineageEvent], str]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                events, cursor = self._events_locked(namespace, after, limit)
                remaining = deadline - time.monotonic()
                if events or remaining <= 0:
                    return events, cursor
                self._changed.wait(namespace, remaining)

    def _latest_cursor(self, namespace: str) -> str:
        with self._lock:
            sp = self._spaces.get(namespace)
            return str(sp.seq if sp is not None else 0)
