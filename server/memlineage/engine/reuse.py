"""Decision reuse: the engine's cache of decisions, behind one small interface.

A decision can be given again to an identical request (namespace, operation,
memories, actor, budget, action, historical flag) for as long as it is exact:
nothing it read has been written since, and its time horizon (the first instant
a time-dependent test it evaluated could flip, computed by the compiler) has not
passed. The engine asks `open()` for a `Window` once per request, before it
reads the store: the window carries the write counters read at that moment, and
`lookup`/`keep` decide against them. `NoReuse` is the twin the engine uses when
reuse is off; the engine's code reads the same either way.

What "nothing written since" means depends on the store (`LineageStore.epochs`):
the embedded store and Redis count every write to a namespace, so any write to
a namespace ends reuse for all of it (bench/README.md says why finer tracking is
not done yet).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import Any

from memlineage_dsl.decision import Decision

from memlineage.engine.records import DecisionContext
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.store.base import LineageStore

# Attributes that move with access statistics (flushed apart from other writes).
ACCESS_FACTS = frozenset({"value_score", "last_access", "access_count"})
TABLE_LIMIT = 100_000

# (namespace, operation, ids, actor kind, actor id, budget, action, historical)
ReuseKey = tuple[str, str, tuple[str, ...], str, str, float, str, bool]


@dataclass(frozen=True, slots=True)
class Reusable:
    """A decision taken, and how long the same request would get it again."""

    decision: Decision
    since: float  # decided at
    until: float  # its snapshot's horizon: the first instant a time-dependent test may flip
    epoch: int  # the store's write counter when decided
    access_epoch: int | None  # the access counter, when the policies read access statistics
    accessed: bool  # a read of a stored memory, not denied: each reuse is an access too

    def holds(self, epoch: int | None, now: float, access_epoch: int | None) -> bool:
        """Still the decision at `now`: nothing written since, and before its horizon."""
        return (self.epoch == epoch and self.since <= now < self.until
                and self.access_epoch == access_epoch)


@dataclass(frozen=True, slots=True)
class ReuseTicket:
    """A reusable Check decision and everything needed to issue it again for the same
    request (`Engine.reissue`) without restating it: a caller that recognises a
    request it saw before skips parsing and validating it; whether the decision
    still holds is decided here, as for any reuse."""

    entry: Reusable
    serving: object  # the policy set it was taken under; a reload voids the ticket
    context: DecisionContext
    record_access: bool  # each issue is a read of a stored memory


class Window:
    """What one request may reuse: the serving set's table and the counters read
    before the store was. A write after the counters were read (even one racing the
    decision) makes what is kept under them unusable."""

    __slots__ = ("access_epoch", "epoch", "table")

    def __init__(self, table: dict[ReuseKey, Reusable] | None, epoch: int | None,
                 access_epoch: int | None) -> None:
        self.table, self.epoch, self.access_epoch = table, epoch, access_epoch

    @property
    def open(self) -> bool:
        return self.table is not None

    def lookup(self, key: ReuseKey, now: float) -> Reusable | None:
        table = self.table
        if table is None:
            return None
        hit = table.get(key)
        if hit is not None and hit.holds(self.epoch, now, self.access_epoch):
            return hit
        return None

    def keep(self, key: ReuseKey, decision: Decision, now: float, horizon: float,
             accessed: bool) -> Reusable | None:
        """Keep `decision` for `key` until `horizon`; None when nothing can be kept."""
        table, epoch = self.table, self.epoch
        if table is None or epoch is None or horizon <= now:
            return None
        entry = Reusable(decision, now, horizon, epoch, self.access_epoch, accessed)
        if len(table) >= TABLE_LIMIT:
            table.clear()
        table[key] = entry
        return entry


CLOSED = Window(None, None, None)


class DecisionReuse:
    """Reusable decisions of the serving policy set, exact against the store's write
    counters. Thread-safe: the table and its policy set live in one tuple, read and
    replaced whole, so a reload racing a worker never pairs a table with another set."""

    def __init__(self, store: LineageStore) -> None:
        self.store = store
        self._tables: tuple[object, dict[ReuseKey, Reusable]] = (None, {})
        # decisions answered by reuse, for metrics: next() on a count is atomic
        self._reused = itertools.count()

    @property
    def reused(self) -> int:
        """How many decisions were answered by reuse so far."""
        return next(copy.copy(self._reused))  # the count's position, without moving it

    def count(self) -> None:
        next(self._reused)

    def open(self, serving: Any, op: str, namespace: str) -> Window:
        """The window of one request: closed when `op`'s decisions cannot be reused (a
        policy not time-exact, a store that does not count its writes, a store that
        does not answer: the read that follows meets the fail mode)."""
        plan = serving.compiled.plans[op]
        if not plan.reusable:
            return CLOSED
        try:
            epochs = self.store.epochs(namespace)
        except StoreUnavailableError:
            return CLOSED
        if epochs is None:
            return CLOSED
        owner, table = self._tables
        if owner is not serving:  # a reload starts afresh
            table = {}
            self._tables = (serving, table)
        return Window(table, epochs[0], epochs[1] if plan.reads & ACCESS_FACTS else None)

    def still_holds(self, ticket: ReuseTicket, now: float) -> bool:
        """Whether the ticket's decision is still exact at `now` (counters read now)."""
        entry = ticket.entry
        try:
            epochs = self.store.epochs(ticket.context.namespace)
        except StoreUnavailableError:  # `check` decides, under the fail mode
            return False
        return epochs is not None and entry.holds(
            epochs[0], now, None if entry.access_epoch is None else epochs[1])


class NoReuse(DecisionReuse):
    """Reuse off: every window is closed, every ticket void."""

    def open(self, serving: Any, op: str, namespace: str) -> Window:
        return CLOSED

    def still_holds(self, ticket: ReuseTicket, now: float) -> bool:
        return False
