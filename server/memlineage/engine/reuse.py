"""Decision reuse: the engine's cache of decisions, behind one small interface.

A decision can be given again to an identical request (namespace, operation,
memories, actor, budget, action, historical flag) for as long as it is exact:
nothing it read has been written since, and its time horizon (the first instant
a time-dependent test it evaluated could flip, computed by the compiler) has not
passed. The engine asks `open()` for a `Window` once per request, before it
reads the store: the window carries the write counters read at that moment, and
`lookup`/`keep` decide against them. `NoReuse` is the twin the engine uses when
reuse is off; the engine's code reads the same either way.

What "nothing it read has been written since" means depends on the store. The
embedded store stamps every change per memory (`LineageStore.change_mark` /
`unchanged_since`): a decision holds while none of the memories it read (the
memory and the lineage loaded with it), nor the source statistics (credibility)
of their sources (creator, confirmers, contradictors), nor, when it read one, the
rate counters, changed, so a write elsewhere in the namespace leaves it standing.
Redis counts writes per namespace (`LineageStore.epochs`): any write to a namespace
ends reuse for all of it there (asking per memory would cost a round trip per
decision; bench/README.md).

The table is shared by namespaces (`engine/shares.py`): a namespace sending many
distinct requests evicts its own decisions, never another namespace's.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memlineage_dsl.decision import Decision

from memlineage.engine.records import DecisionContext
from memlineage.engine.shares import Shares
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.lineage.model import MemoryRecord
from memlineage.store.base import LineageStore

# Attributes that move with access statistics (flushed apart from other writes).
ACCESS_FACTS = frozenset({"value_score", "last_access", "access_count"})
TABLE_LIMIT = 100_000  # decisions kept in all, shared by the namespaces
NAMESPACES_LIMIT = 1024  # namespaces tracked at once

# (namespace, operation, ids, actor kind, actor id, budget, action, historical)
ReuseKey = tuple[str, str, tuple[str, ...], str, str, float, str, bool]


@dataclass(frozen=True, slots=True)
class Reusable:
    """A decision taken, and what must stay unchanged for the same request to get it
    again: either the namespace's write counters (`epoch`, `access_epoch`) or, on a
    store that tracks changes per memory, the memories it `read` since `mark`."""

    decision: Decision
    since: float  # decided at
    until: float  # its snapshot's horizon: the first instant a time-dependent test may flip
    accessed: bool  # a read of a stored memory, not denied: each reuse is an access too
    epoch: int | None  # the namespace's write counter when decided (per-namespace stores)
    access_epoch: int | None  # the access counter, when the policies read access statistics
    mark: int | None = None  # the store's change mark, read before the store (per memory)
    read: tuple[str, ...] = ()  # the memories whose records the decision read
    counted: bool = False  # it read a rate counter
    access: bool = False  # its policies read access statistics
    # what the decision read, as captured (`decision_log_inputs`): each reuse is logged
    # with it, so that `replay` re-decides the traffic, not only the fresh decisions
    input: str | None = None


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
    """What one request may reuse: the serving set's table of its namespace (`shares`)
    and the store's counters or change mark, read before the store was. A write after
    they were read (even one racing the decision) makes what is kept under them
    unusable."""

    __slots__ = (
        "access",
        "access_epoch",
        "down",
        "epoch",
        "mark",
        "namespace",
        "reuse",
        "shares",
        "table",
    )

    def __init__(
        self,
        reuse: DecisionReuse | None,
        shares: Shares[ReuseKey, Reusable] | None,
        namespace: str = "",
        epoch: int | None = None,
        access_epoch: int | None = None,
        mark: int | None = None,
        access: bool = False,
    ) -> None:
        self.reuse, self.shares, self.namespace = reuse, shares, namespace
        # the namespace's table as the window opened (read only; None: closed)
        self.table: dict[ReuseKey, Reusable] | None = (
            None if shares is None else shares.tables.get(namespace, _NONE_KEPT)
        )
        self.epoch, self.access_epoch, self.mark, self.access = (epoch, access_epoch, mark, access)
        # the store did not answer the counters: the request meets the fail mode at
        # once instead of waiting on the store again for its lineage (each read waited
        # its socket timeout: a repeated Check waited three, past the client's deadline)
        self.down: StoreUnavailableError | None = None

    def lookup(self, key: ReuseKey, now: float) -> Reusable | None:
        table = self.table
        if table is None:
            return None
        hit = table.get(key)
        if hit is None or self.reuse is None:
            return None
        if self.reuse.holds(hit, self.namespace, now, self.epoch, self.access_epoch):
            return hit
        return None

    @property
    def keeps_reads(self) -> bool:
        """Whether `keep` uses the ids a decision read (only a change mark does): when
        not, a caller need not compute them (reuse off, or the store's counters)."""
        return self.table is not None and self.mark is not None

    def keep(
        self,
        key: ReuseKey,
        decision: Decision,
        now: float,
        horizon: float,
        accessed: bool,
        read: tuple[str, ...],
        counted: bool,
        captured: str | None = None,
    ) -> Reusable | None:
        """Keep `decision` for `key` until `horizon`, valid while the memories it `read`
        (and the counters, if `counted`) are unchanged; None when nothing can be kept."""
        shares = self.shares
        if shares is None or horizon <= now:
            return None
        if self.mark is not None:
            entry = Reusable(
                decision,
                now,
                horizon,
                accessed,
                None,
                None,
                self.mark,
                read,
                counted,
                self.access,
                captured,
            )
        elif self.epoch is not None:
            entry = Reusable(
                decision, now, horizon, accessed, self.epoch, self.access_epoch, input=captured
            )
        else:
            return None
        shares.put(self.namespace, key, entry)
        # later lookups of this window (a batch) see it, in a table made by this put
        self.table = shares.tables.get(self.namespace, _NONE_KEPT)
        return entry


_NONE_KEPT: dict[ReuseKey, Reusable] = {}  # a namespace with nothing kept: never written
CLOSED = Window(None, None)


def store_down_window(error: StoreUnavailableError) -> Window:
    """A closed window saying the store did not answer (`Window.down`)."""
    window = Window(None, None)
    window.down = error
    return window


class DecisionReuse:
    """Reusable decisions of the serving policy set, exact against the store's write
    counters. Thread-safe: the table and its policy set live in one tuple, read and
    replaced whole, so a reload racing a worker never pairs a table with another set."""

    def __init__(self, store: LineageStore) -> None:
        self.store = store
        self._tables: tuple[object, Shares[ReuseKey, Reusable]] = (None, self._fresh())
        # decisions answered by reuse, for metrics: next() on a count is atomic
        self._reused = itertools.count()

    @staticmethod
    def _fresh() -> Shares[ReuseKey, Reusable]:
        return Shares(TABLE_LIMIT, NAMESPACES_LIMIT)

    def held(self, namespace: str) -> int:
        """How many decisions of `namespace` are kept for reuse."""
        return self._tables[1].held(namespace)

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
        store = self.store
        try:
            epochs = store.epochs(namespace)
            mark = store.change_mark()
        except StoreUnavailableError as exc:
            return store_down_window(exc)
        if epochs is None:
            return CLOSED
        owner, shares = self._tables
        if owner is not serving:  # a reload starts afresh
            shares = self._fresh()
            self._tables = (serving, shares)
        access = bool(plan.reads & ACCESS_FACTS)
        return Window(
            self, shares, namespace, epochs[0], epochs[1] if access else None, mark, access
        )

    def holds(
        self,
        entry: Reusable,
        namespace: str,
        now: float,
        epoch: int | None,
        access_epoch: int | None,
    ) -> bool:
        """`entry` is still the decision at `now`: before its horizon, and nothing it
        depends on changed (per memory since its mark, or the counters `epoch` and
        `access_epoch` read now equal those it was kept under)."""
        if not entry.since <= now < entry.until:
            return False
        if entry.mark is not None:
            return self.store.unchanged_since(
                namespace, entry.read, entry.mark, access=entry.access, counters=entry.counted
            )
        return entry.epoch == epoch and entry.access_epoch == access_epoch

    def still_holds(self, ticket: ReuseTicket, now: float) -> bool:
        """Whether the ticket's decision is still exact at `now` (counters read now);
        StoreUnavailableError when the store did not answer (the caller then meets the
        fail mode without asking the store again: `check_ticketed(unanswered=error)`)."""
        entry, ns = ticket.entry, ticket.context.namespace
        if entry.mark is not None:
            return self.holds(entry, ns, now, None, None)
        epochs = self.store.epochs(ns)
        return epochs is not None and self.holds(
            entry, ns, now, epochs[0], None if entry.access_epoch is None else epochs[1]
        )


class NoReuse(DecisionReuse):
    """Reuse off: every window is closed, every ticket void."""

    def open(self, serving: Any, op: str, namespace: str) -> Window:
        return CLOSED

    def still_holds(self, ticket: ReuseTicket, now: float) -> bool:
        return False


def lineage_ids(
    records: Mapping[str, MemoryRecord], start: str, descendants: bool
) -> tuple[str, ...]:
    """`start` and the loaded records its decision can have read: its ancestors among
    `records` (and its descendants, when the policies walk them)."""
    seen = {start: None}
    todo = [start]
    while todo:
        rec = records.get(todo.pop())
        if rec is None:
            continue
        for n in (*rec.dependencies, *rec.derivations) if descendants else rec.dependencies:
            n = n if type(n) is str else str(getattr(n, "id", n))
            if n not in seen:
                seen[n] = None
                todo.append(n)
    return tuple(seen)
