"""The Watch event log on Redis: the namespace's stream ``ml:{ns}:ev``, cursors,
paging (EVENTS script) and waiting (``XREAD BLOCK`` in slices shorter than the
client's socket timeout)."""

from __future__ import annotations

import re
import time
from typing import Any, cast

from memlineage.lineage.errors import CursorExpiredError
from memlineage.lineage.model import LineageEvent
from memlineage.store.redis_base import RedisBase
from memlineage.store.redis_codec import decode_event

_CURSOR_RE = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")
_MAX_BLOCK_SECONDS = 5.0


class RedisEvents(RedisBase):
    """Lineage events: cursor parsing, paging, waiting, the latest cursor."""

    def _parse_cursor(self, cursor: str) -> str | None:
        m = _CURSOR_RE.fullmatch(cursor)
        if m is None:
            return None
        ms, seq = int(m.group(1)), int(m.group(2))
        if ms >= 2**64 or seq >= 2**64:
            return None
        return f"{ms}-{seq}"

    def _events(
        self, namespace: str, after: str | None, limit: int
    ) -> tuple[list[LineageEvent], str]:
        out = self._run("events", [self.keys.events(namespace)], [after or "", limit])
        if out[0] == 0:
            if out[1] == "EXPIRED":
                raise CursorExpiredError(
                    f"events after cursor {after} were dropped (the oldest retained follows "
                    f"{out[2]}); re-sync"
                )
            if out[1] == "LOST":
                raise CursorExpiredError(
                    f"cursor {after} is not in this namespace's log any more (the next event "
                    f"follows {out[2]}): the events up to it were lost (a Redis failover to a "
                    "replica without them, or data restored from an older copy); re-sync"
                )
            raise CursorExpiredError(
                f"cursor {after} is ahead of this namespace's log (at {out[2]}): the store "
                "was reset or the cursor is not from it; re-sync"
            )
        events = [decode_event(namespace, entry_id, flat) for entry_id, flat in out[2]]
        if events:
            return events, events[-1].cursor
        return events, out[1] if after is None else after

    def _wait_events(
        self, namespace: str, after: str | None, limit: int, timeout: float
    ) -> tuple[list[LineageEvent], str]:
        deadline = time.monotonic() + timeout
        key = self.keys.events(namespace)
        while True:
            events, cursor = self._events(namespace, after, limit)
            remaining = deadline - time.monotonic()
            if events or remaining <= 0:
                return events, cursor
            block_ms = max(1, int(min(remaining, self._block_slice) * 1000))
            with self._guard(key):  # wakes on the first new entry; read it via _events
                self.client.xread({key: cursor}, count=1, block=block_ms)

    def _latest_cursor(self, namespace: str) -> str:
        key = self.keys.events(namespace)
        with self._guard(key):
            last = cast("list[tuple[str, Any]]", self.client.xrevrange(key, count=1))
        return last[0][0] if last else "0-0"


def block_slice(client: Any) -> float:
    """The longest single ``XREAD BLOCK`` for ``client``: an XREAD BLOCK longer than
    the socket timeout would look like a dead server."""
    timeout = _socket_timeout(client)
    return (
        _MAX_BLOCK_SECONDS if timeout is None else min(_MAX_BLOCK_SECONDS, max(0.01, timeout / 2))
    )


def _socket_timeout(client: Any) -> float | None:
    """The client's socket timeout (standalone pool or cluster node settings), if any."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if kwargs is None:
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None)
    timeout = (kwargs or {}).get("socket_timeout")
    return float(timeout) if timeout else None
