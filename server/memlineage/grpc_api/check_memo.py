"""Check requests recognised by their encoded bytes.

An agent asks about the same memories again and again. When the engine says a
Check decision is reusable it hands back a `ReuseTicket`; the servicer keeps it
under the request's bytes (and the caller's namespaces, which decide what a
request may name), with the answer pre-encoded but for its id and time. The same
bytes from a caller with the same namespaces then skip parsing, validation and
the engine's lookup: `Engine.reissue` still decides whether the decision holds
and issues it as a decision of its own. Identical bytes always parse to the same
request; different bytes for an equal request simply make two entries.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlineage.engine.reuse import ReuseTicket
from memlineage.grpc_api.wire import CheckAnswer


@dataclass(frozen=True, slots=True)
class Remembered:
    ticket: ReuseTicket
    answer: CheckAnswer
    tallies: tuple[list[int], ...]  # the metrics cells its decision counts in


class CheckMemo:
    """At most `limit` requests; when full it starts afresh (a request not found is
    only decided the ordinary way)."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._entries: dict[tuple[object, bytes], Remembered] = {}

    def get(self, key: tuple[object, bytes]) -> Remembered | None:
        return self._entries.get(key)

    def put(self, key: tuple[object, bytes], entry: Remembered) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[key] = entry

    def __len__(self) -> int:
        return len(self._entries)
