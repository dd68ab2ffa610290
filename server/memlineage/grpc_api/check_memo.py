"""Check requests recognised by their encoded bytes.

An agent asks about the same memories again and again. When the engine says a
Check decision is reusable it hands back a `ReuseTicket`; the servicer keeps it
under the request's bytes (and the caller's namespaces, which decide what a
request may name), with the answer pre-encoded but for its id and time. The same
bytes from a caller with the same namespaces then skip parsing, validation and
the engine's lookup: `Engine.reissue` still decides whether the decision holds
and issues it as a decision of its own. Identical bytes always parse to the same
request; different bytes for an equal request simply make two entries.

Entries are kept per caller scope (`engine/shares.py`): a caller sending many
distinct requests evicts its own, never another caller's (an outside audit).
"""

from __future__ import annotations

from dataclasses import dataclass

from memlineage.engine.reuse import ReuseTicket
from memlineage.engine.shares import Shares
from memlineage.grpc_api.wire import CheckAnswer


@dataclass(frozen=True, slots=True)
class Remembered:
    ticket: ReuseTicket
    answer: CheckAnswer
    tallies: tuple[list[int], ...]  # the metrics cells its decision counts in


class CheckMemo:
    """At most `limit` requests, shared by caller scopes; when full, the scope holding
    the most loses its entries (a request not found is only decided the ordinary way)."""

    def __init__(self, limit: int = 100_000, scopes: int = 1024) -> None:
        self.limit = limit
        self._shares: Shares[bytes, Remembered] = Shares(limit, scopes)
        self._tables = self._shares.tables

    def get(self, key: tuple[object, bytes]) -> Remembered | None:
        table = self._tables.get(key[0])
        return table.get(key[1]) if table is not None else None

    def put(self, key: tuple[object, bytes], entry: Remembered) -> None:
        self._shares.put(key[0], key[1], entry)

    def held(self, scope: object) -> int:
        """How many requests of the caller scope `scope` are remembered."""
        return self._shares.held(scope)

    def __len__(self) -> int:
        return len(self._shares)
