"""The lineage store contract, shared by the embedded and Redis backends.

Backends implement a handful of atomic primitives (record, status change with
cascade, compare-and-set update, batch load, claim lookup, access and counter
updates); the traversals (ancestors, descendants, lineage_view) are written
once here on top of ``_load``, one batch load per BFS level, so every backend
answers a lineage view in ``depth + 1`` round trips whatever the fan-out.

Every lineage change also appends to the namespace's event log atomically with
the change (``events`` / ``wait_events`` / ``latest_cursor``, for the Watch RPC).

``LineageStore`` is declared here with every backend primitive it needs, its
reads, traversals, event log, access statistics and rate counters; the rest of
its public surface comes from mixins, one module per concern:

- ``store.changes``: status changes with their cascade, ``update``,
  ``add_dependencies`` (``LineageChangesMixin``) and ``cascade_reason``;
- ``store.claim_record``: the Record-with-claim default ``record_claim``
  (``ClaimRecordMixin``) with ``RecordOutcome``, ``ClaimMovedError``,
  ``record_digest`` and ``ANY_HOLDER``;
- ``store.reliability``: claim groups, source statistics, usage feedback
  (``ReliabilityMixin``) and the review schedule (``ReviewScheduleMixin``);
- ``store.revisions``: versions of a memory, ``revise`` and ``versions``
  (``RevisionsMixin``, over the backends' atomic ``_revise``);
- ``store.decisions``: the kept-decision API defaults (``KeptDecisionsMixin``).
- ``store.grants``: delegations and their atomic use (``GrantsMixin``).
- ``store.proposals``: the sweep's proposed transitions and objections (``ProposalsMixin``).

The names backends import from here (``ANY_HOLDER``, ``MAX_BATCH_IDS``,
``ClaimMovedError``, ``RecordOutcome``, ``cascade_reason``, ``record_digest``) are
re-exported.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from memlineage.lineage.clock import Clock, system_clock
from memlineage.lineage.columns import ScoreColumns, score_columns_of
from memlineage.lineage.errors import NotFoundError
from memlineage.lineage.model import (
    CascadeResult,
    LineageEvent,
    LineageView,
    MemoryRecord,
    Status,
    Walk,
)
from memlineage.lineage.validation import (
    StoreLimits,
    check_id,
    check_limit,
    check_time,
    check_window,
)
from memlineage.store import traversal
from memlineage.store.arguments import (
    MAX_BATCH_IDS,
    check_accesses,
    check_cursor,
    check_ids,
    check_page,
    check_wait,
    id_batch_pattern,
)
from memlineage.store.changes import LineageChangesMixin, cascade_reason
from memlineage.store.claim_record import ANY_HOLDER as ANY_HOLDER  # re-exported
from memlineage.store.claim_record import (
    ClaimMovedError,
    ClaimRecordMixin,
    RecordOutcome,
    record_digest,
)
from memlineage.store.decisions import KeptDecisionsMixin
from memlineage.store.grants import GrantsMixin
from memlineage.store.proposals import ProposalsMixin
from memlineage.store.reliability import ReliabilityMixin, ReviewScheduleMixin
from memlineage.store.revisions import RevisionOutcome, RevisionsMixin

__all__ = [
    "MAX_BATCH_IDS",
    "ClaimMovedError",
    "LineageStore",
    "RecordOutcome",
    "cascade_reason",
    "record_digest",
]


COUNTER_PREFIX_ROOM = 16
"""Characters a counter's name may have beyond an id's limit (its prefix)."""


class LineageStore(
    ClaimRecordMixin,
    LineageChangesMixin,
    RevisionsMixin,
    ReliabilityMixin,
    ReviewScheduleMixin,
    KeptDecisionsMixin,
    GrantsMixin,
    ProposalsMixin,
    ABC,
):
    """One interface for every backend; all methods are synchronous and thread-safe."""

    kind: str = "abstract"
    # True when calls wait on another process (a network store): a server then wants
    # more threads in flight than cores; an in-process store keeps them on the CPU.
    waits_on_network: bool = False
    # True when reads hand out the same immutable record object until the memory
    # changes (callers may then cache what they derive from it, keyed on the object).
    shares_records: bool = False
    # Write counters of a store whose writers are all in this process (embedded):
    # `epoch` moves on every write except access statistics and the review schedule,
    # `access_epoch` on access statistics. See `epochs`.
    epoch: int | None = None
    access_epoch: int | None = None
    # Decisions kept per namespace (`keep_decisions`): the newest this many; the server
    # sets it from `decision_retention`.
    decision_retention: int = 10_000

    def busy(self) -> bool:
        """Whether another thread holds the store now (a compaction, a cascade, a sweep
        batch), so that a call would wait for it: a server answering on an event loop
        then runs the call on a thread instead, and the loop (health among it) stays
        free. A store that never makes callers wait on each other says False."""
        return False

    def __init__(self, *, clock: Clock = system_clock, limits: StoreLimits | None = None):
        self.clock = clock
        self.limits = limits or StoreLimits()
        self._batch_ids_re = id_batch_pattern(self.limits.max_id_length)
        self._snapshot: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        """Held across a traversal; the embedded store makes it its lock (a consistent
        snapshot).  A plain context manager, not a generator: it is on the read path."""

    def epochs(self, namespace: str) -> tuple[int, int] | None:
        """Write counters covering `namespace`, for callers that reuse what they
        derived from the store: (writes, access-statistics flushes), each moved by
        every such write atomically with it; the review schedule moves neither. Equal
        counters mean nothing the namespace holds has changed in between (writes to
        other namespaces may or may not move them). None: not counted, reuse nothing.
        Read them before reading what they guard."""
        if self.epoch is None or self.access_epoch is None:
            return None
        return self.epoch, self.access_epoch

    def change_mark(self) -> int | None:
        """For callers that reuse what they derived from some memories: a mark to ask
        `unchanged_since` about later, taken before reading. None (this default):
        the store tracks no change per memory; `epochs` covers the whole namespace."""
        return None

    def unchanged_since(
        self,
        namespace: str,
        ids: Iterable[str],
        mark: int,
        *,
        access: bool = False,
        counters: bool = False,
    ) -> bool:
        """True only when nothing the memories `ids` hold, nor the namespace's source
        statistics, changed since `mark` (with `access`, their access statistics too;
        with `counters`, the namespace's rate counters). This default knows nothing
        and answers False."""
        return False

    # -- helpers ---------------------------------------------------------------

    def _now(self, now: float | None) -> float:
        return self.clock() if now is None else check_time(now, "now")

    def _ns(self, namespace: str) -> str:
        return check_id(namespace, "namespace", max_length=self.limits.max_id_length)

    def _id(self, memory_id: str, field: str = "id") -> str:
        return check_id(memory_id, field, max_length=self.limits.max_id_length)

    def _counter(self, name: str) -> str:
        """A counter's name: an id with room for the prefix the engine puts before one
        (``calls:`` + a creator id of the longest length; before, a creator id of 123
        to 128 characters failed its Record as ``name: is 134 characters long``, a
        field the caller never sent; an outside audit)."""
        return check_id(name, "name", max_length=self.limits.max_id_length + COUNTER_PREFIX_ROOM)

    def _ids(self, ids: Iterable[str]) -> list[str]:
        return check_ids(ids, self._batch_ids_re, self.limits.max_id_length)

    # -- backend primitives ---------------------------------------------------------

    @abstractmethod
    def record(self, rec: MemoryRecord, *, now: float | None = None) -> MemoryRecord:
        """Create a memory: validate, check dependencies (exist, same namespace), write the
        record, its derivation links and its claim index entry atomically.

        A memory recorded on a pending/revoked/superseded dependency starts as
        pending_verification (so cascades stay complete under concurrency).
        Raises ValidationError (and subclasses), NamespaceError, AlreadyExistsError.
        """

    def durability(self) -> str:
        """What an acknowledged write survives, in words for an operator (the serving
        banner, `memlineage store check`): read from the store as it runs, not from
        the settings it was asked for."""
        return "what the store's own server keeps"

    def ping(self) -> bool:
        """True when the store answers now (within its client's timeouts), never raises:
        what the health service reports. In-process stores always answer."""
        return True

    @abstractmethod
    def _change_status(
        self,
        namespace: str,
        memory_id: str,
        target: Status,
        *,
        reason: str,
        successor: str | None,
        expected_version: int | None,
        now: float,
        only_from: frozenset[Status] | None,
        idle_only: bool = False,
    ) -> CascadeResult:
        """Atomically check and apply a status change, then cascade if it revokes/supersedes.

        ``idle_only``: refuse (TransitionError) while a derivation is live (active or
        pending_verification), checked in the same atomic step as the change."""

    @abstractmethod
    def _update(
        self,
        namespace: str,
        memory_id: str,
        expected_version: int,
        changes: dict[str, Any],
        now: float,
    ) -> MemoryRecord:
        """Compare-and-set the given (validated) fields."""

    @abstractmethod
    def _add_dependencies(
        self,
        namespace: str,
        memory_id: str,
        deps: tuple[str, ...],
        expected_version: int,
        now: float,
    ) -> MemoryRecord:
        """Atomically add (pre-validated) dependencies after the existence and cycle checks."""

    @abstractmethod
    def _revise(self, rec: MemoryRecord, expected_version: int, now: float) -> RevisionOutcome:
        """Atomically check and apply one revision of ``rec.id`` (validated as new):
        everything ``revise`` says, all of it or nothing."""

    @abstractmethod
    def _versions(self, namespace: str, memory_id: str) -> list[MemoryRecord]:
        """The earlier versions of a memory, oldest first (none: empty)."""

    @abstractmethod
    def _load(
        self, namespace: str, ids: list[str], with_history: bool = True
    ) -> dict[str, MemoryRecord]:
        """Fetch existing records (with derivations) in one round trip; missing ids omitted.

        ``with_history=False``: the records' ``status_history`` is empty (Redis skips
        reading it; the embedded store hands out its cached copy without it)."""

    @abstractmethod
    def _current_claim_id(self, namespace: str, subject: str, attribute: str) -> str | None:
        """The id holding the (subject, attribute) claim index entry, if any."""

    @abstractmethod
    def _record_accesses(self, namespace: str, accesses: dict[str, tuple[int, float]]) -> int:
        """For each existing id add ``count`` to access_count and move last_access to
        max(current, time), in one atomic step; return how many existed."""

    @abstractmethod
    def _incr_counter(self, namespace: str, name: str, now: float) -> None: ...

    @abstractmethod
    def _claim_group(self, namespace: str, subject: str, attribute: str) -> list[MemoryRecord]:
        """Every record ever recorded with the claim (any order)."""

    @abstractmethod
    def _source_stats(
        self, namespace: str, sources: list[str]
    ) -> dict[str, tuple[float, float]]: ...

    @abstractmethod
    def _feedback(self, namespace: str, ids: list[str], success: bool, now: float) -> int: ...

    @abstractmethod
    def _due_for_review(self, namespace: str, now: float, limit: int) -> list[str]: ...

    @abstractmethod
    def _schedule_review(self, namespace: str, times: dict[str, float], now: float) -> int: ...

    @abstractmethod
    def _unschedule_review(self, namespace: str, ids: list[str]) -> int: ...

    @abstractmethod
    def namespaces(self) -> list[str]:
        """Every namespace holding at least one memory, sorted."""

    @abstractmethod
    def _count(self, namespace: str, name: str, since: float, now: float) -> int: ...

    @abstractmethod
    def _parse_cursor(self, cursor: str) -> str | None:
        """The normalised cursor, or None when it is not one of this backend's."""

    @abstractmethod
    def _events(
        self, namespace: str, after: str | None, limit: int
    ) -> tuple[list[LineageEvent], str]:
        """Events strictly after ``after`` (None: from the oldest retained)."""

    @abstractmethod
    def _wait_events(
        self, namespace: str, after: str | None, limit: int, timeout: float
    ) -> tuple[list[LineageEvent], str]: ...

    @abstractmethod
    def _latest_cursor(self, namespace: str) -> str: ...

    @abstractmethod
    def close(self) -> None:
        """Release connections/files; the store is unusable afterwards."""

    def maybe_compact(self, max_log_bytes: int) -> bool:
        """Maintenance hook, called periodically by the server (after each access
        flush): fold the store's own on-disk op log into a snapshot once it has
        grown past ``max_log_bytes`` (bounding replay at the next start) and return
        True when it did.

        This default, for stores without such a log (Redis; an embedded store without
        a data directory), does nothing and returns False."""
        return False

    def finish_cascades(self, min_age: float = 0.0, now: float | None = None) -> int:
        """Maintenance hook, called by the server at start and then periodically:
        finish the cascades a stopped process left half-way (begun at least
        ``min_age`` seconds ago); returns how many it resumed.

        This default, for stores whose status change and cascade are one step (the
        embedded store), has nothing to finish."""
        return 0

    def __enter__(self) -> LineageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads ---------------------------------------------------------------------

    def get(self, namespace: str, memory_id: str) -> MemoryRecord:
        ns = self._ns(namespace)
        memory_id = self._id(memory_id)
        found = self._load(ns, [memory_id]).get(memory_id)
        if found is None:
            raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="memory_id")
        return found

    def get_many(
        self, namespace: str, ids: Iterable[str], *, with_history: bool = False
    ) -> dict[str, MemoryRecord]:
        """Existing records among ``ids`` in one round trip (missing ids are omitted).

        Records carry their derivations; their ``status_history`` only with
        ``with_history=True`` (decisions never read it; :meth:`get`, the walks and
        Explain do)."""
        return self._load(self._ns(namespace), self._ids(ids), with_history)

    def score_columns(self, namespace: str, ids: Iterable[str]) -> ScoreColumns:
        """The score inputs of the existing memories among ``ids`` (in order, each
        once) as numpy columns, for ``scoring.batch.score_columns``.

        This default builds them from ``get_many`` records (Redis backends); only the
        embedded store is columnar: it keeps the columns up to date on every write and
        answers with ``np.take`` (cost proportional to ``len(ids)``)."""
        ns = self._ns(namespace)
        wanted = self._ids(ids)
        found = self._load(ns, wanted, False)
        return score_columns_of(found[i] for i in wanted if i in found)

    def current_claim(self, namespace: str, subject: str, attribute: str) -> MemoryRecord | None:
        """The latest recorded memory asserting (subject, attribute), unless it was
        revoked, superseded or evicted since; a new claim compares itself against it."""
        ns = self._ns(namespace)
        check_id(subject, "subject")
        check_id(attribute, "attribute")
        holder = self._current_claim_id(ns, subject, attribute)
        if holder is None:
            return None
        return self._load(ns, [holder]).get(holder)

    def ancestors(
        self, namespace: str, memory_id: str, *, max_depth: int = 8, limit: int = 1000
    ) -> Walk:
        """What ``memory_id`` was derived from, breadth first, excluding itself."""
        return self._walk(namespace, memory_id, max_depth, limit, up=True)

    def descendants(
        self, namespace: str, memory_id: str, *, max_depth: int = 8, limit: int = 1000
    ) -> Walk:
        """What was built on ``memory_id``, breadth first, excluding itself."""
        return self._walk(namespace, memory_id, max_depth, limit, up=False)

    def _walk(
        self, namespace: str, memory_id: str, max_depth: int, limit: int, *, up: bool
    ) -> Walk:
        ns = self._ns(namespace)
        memory_id = self._id(memory_id)
        check_limit(max_depth, "max_depth", self.limits.max_walk_depth)
        check_limit(limit, "limit", self.limits.max_walk_count)
        with self._snapshot:
            return traversal.walk(self._load, ns, memory_id, max_depth, limit, up=up)

    def lineage_view(
        self,
        namespace: str,
        ids: Iterable[str],
        *,
        ancestor_depth: int = 8,
        descendant_depth: int = 0,
        limit: int = 5000,
        with_history: bool = False,
    ) -> LineageView:
        """The records ``ids`` plus their ancestors (and descendants) in one BFS.

        Ancestor and descendant frontiers are loaded together, one batch per
        level: ``1 + max(ancestor_depth, descendant_depth)`` round trips at most.
        ``limit`` bounds the records added beyond ``ids``.  Records carry their
        derivations; their ``status_history`` only with ``with_history=True``.
        """
        ns = self._ns(namespace)
        wanted = self._ids(ids)
        check_limit(ancestor_depth, "ancestor_depth", self.limits.max_walk_depth)
        check_limit(descendant_depth, "descendant_depth", self.limits.max_walk_depth)
        check_limit(limit, "limit", self.limits.max_walk_count)
        with self._snapshot:
            return traversal.lineage_view(
                self._load, ns, wanted, ancestor_depth, descendant_depth, limit, with_history
            )

    # -- lineage event log (the Watch stream) --------------------------------------------

    def events(
        self, namespace: str, *, after: str | None = None, limit: int = 500
    ) -> tuple[list[LineageEvent], str]:
        """Up to ``limit`` events of ``namespace`` strictly after the cursor ``after``
        (None: from the oldest retained), oldest first, and the cursor to resume from
        (the last event's, or ``after`` itself when there is nothing new).

        Every lineage change appends its events atomically with the change, so a
        reader that resumes from the returned cursor misses nothing and sees no
        event of a failed change.  Raises CursorExpiredError (OUT_OF_RANGE) when
        events after ``after`` were already dropped by retention (or the log was
        reset): the reader must re-sync; ValidationError for a malformed cursor.
        """
        ns = self._ns(namespace)
        return self._events(
            ns,
            check_cursor(after, self._parse_cursor),
            check_page(limit, self.limits.max_event_page),
        )

    def wait_events(
        self, namespace: str, *, after: str | None, limit: int = 500, timeout: float
    ) -> tuple[list[LineageEvent], str]:
        """Like :meth:`events`, but block up to ``timeout`` seconds until at least one
        event exists after ``after``; returns ``([], cursor)`` on timeout."""
        ns = self._ns(namespace)
        cursor = check_cursor(after, self._parse_cursor)
        limit = check_page(limit, self.limits.max_event_page)
        wait = check_wait(timeout)
        return self._wait_events(ns, cursor, limit, wait)

    def latest_cursor(self, namespace: str) -> str:
        """The cursor of the newest event (or of the empty log): watch "from now"."""
        return self._latest_cursor(self._ns(namespace))

    # -- statistics -------------------------------------------------------------------

    def record_access(self, namespace: str, ids: Iterable[str], *, now: float | None = None) -> int:
        """Bump access_count and last_access (never moving it backwards) for existing
        ids in one round trip; unknown ids are ignored. Does not bump versions."""
        ns = self._ns(namespace)
        wanted = self._ids(ids)
        at = self._now(now)
        return self._record_accesses(ns, dict.fromkeys(wanted, (1, at))) if wanted else 0

    def record_accesses(self, namespace: str, accesses: Mapping[str, tuple[int, float]]) -> int:
        """Flush buffered reads: for each existing id add ``count`` to access_count and
        move last_access to max(current, time), all in one atomic step (one op-log
        line embedded, one script call on Redis).  Unknown ids are ignored; returns
        how many existed.  No version bump, no event."""
        ns = self._ns(namespace)
        checked = check_accesses(accesses, self._ids)
        return self._record_accesses(ns, checked) if checked else 0

    def incr_counter(self, namespace: str, name: str, *, now: float | None = None) -> None:
        """Count one event (e.g. a call of tool:flight_api) at ``now``.

        Events older than ``limits.counter_retention_seconds`` are dropped."""
        self._incr_counter(self._ns(namespace), self._counter(name), self._now(now))

    def count(
        self, namespace: str, name: str, window_seconds: float, *, now: float | None = None
    ) -> int:
        """Events of ``name`` in the sliding window ``(now - window_seconds, now]``."""
        return self.count_until(namespace, name, window_seconds, now=now)[0]

    def count_until(
        self, namespace: str, name: str, window_seconds: float, *, now: float | None = None
    ) -> tuple[int, float]:
        """``count`` and the instant it next changes if no event is added (an event
        leaves the window or a later one enters); this default knows no such
        instant and answers ``now``."""
        ns = self._ns(namespace)
        self._counter(name)
        window = check_window(window_seconds, self.limits)
        at = self._now(now)
        return self._count_with_change(ns, name, window, at)

    def _count_with_change(
        self, namespace: str, name: str, window: float, now: float
    ) -> tuple[int, float]:
        return (
            self._count(namespace, name, now - window, now),
            self._count_change(namespace, name, window, now),
        )

    def _count_change(self, namespace: str, name: str, window: float, now: float) -> float:
        return now
