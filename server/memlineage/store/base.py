"""The lineage store contract, shared by the embedded and Redis backends.

Backends implement a handful of atomic primitives (record, status change with
cascade, compare-and-set update, batch load, claim lookup, access and counter
updates); the traversals (ancestors, descendants, lineage_view) are written
once here on top of ``_load``, one batch load per BFS level, so every backend
answers a lineage view in ``depth + 1`` round trips whatever the fan-out.

Every lineage change also appends to the namespace's event log atomically with
the change (``events`` / ``wait_events`` / ``latest_cursor``, for the Watch RPC).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memlineage.lineage.clock import Clock, system_clock
from memlineage.lineage.columns import ScoreColumns, score_columns_of
from memlineage.lineage.decisions import KeptDecision
from memlineage.lineage.errors import (
    AlreadyExistsError,
    LineageError,
    NotFoundError,
    ValidationError,
)
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
    check_dependencies,
    check_id,
    check_limit,
    check_reason,
    check_status,
    check_time,
    check_window,
    validate_changes,
    validate_new,
)
from memlineage.store import traversal
from memlineage.store.arguments import (
    MAX_BATCH_IDS,
    check_accesses,
    check_cursor,
    check_ids,
    check_page,
    check_sources,
    check_wait,
    id_batch_pattern,
)

__all__ = [
    "MAX_BATCH_IDS",
    "ClaimMovedError",
    "LineageStore",
    "RecordOutcome",
    "cascade_reason",
    "record_digest",
]

ANY_HOLDER = "\x00any"
"""``record_claim(holder=ANY_HOLDER)``: whoever holds the claim now (no check)."""


class ClaimMovedError(LineageError):
    """The claim's holder is no longer the one the caller decided against (another
    record of the claim came in between); nothing was written: decide again."""

    code = "CLAIM_MOVED"
    grpc_status = "ABORTED"

    def __init__(self, message: str, *, holder: str | None):
        super().__init__(message, field="memory.claim")
        self.holder = holder


@dataclass(frozen=True, slots=True)
class RecordOutcome:
    """What one atomic Record did: the memory as stored, the claim holder it superseded
    (and the descendants that supersession marked pending_verification), and whether
    this call was a replay of an identical earlier Record (nothing written again)."""

    memory: MemoryRecord
    superseded_id: str | None = None
    affected: tuple[str, ...] = ()
    replayed: bool = False


def record_digest(rec: MemoryRecord, *, with_created_at: bool = True) -> str:
    """A stable digest of what a caller proposes to record (the validated record's own
    fields; ``created_at`` only when the caller set it): an identical retry of a Record
    has the same digest, a different memory under the same id another one."""
    fields = [
        rec.namespace,
        rec.id,
        rec.type,
        sorted(rec.tags),
        rec.subject,
        rec.attribute,
        rec.value,
        rec.volatility,
        rec.creator_kind,
        rec.creator_id,
        repr(float(rec.creator_confidence)),
        rec.context_id,
        [str(getattr(d, "id", d)) for d in rec.dependencies],
        repr(float(rec.created_at)) if with_created_at and rec.created_at is not None else None,
    ]
    text = json.dumps(fields, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def cascade_reason(target: Status, reason: str) -> str:
    """The history reason written on descendants re-marked by a cascade."""
    return f"ancestor {target.value}: {reason}" if reason else f"ancestor {target.value}"


class LineageStore(ABC):
    """One interface for every backend; all methods are synchronous and thread-safe."""

    kind: str = "abstract"
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

    def record_claim(
        self,
        rec: MemoryRecord,
        *,
        now: float | None = None,
        digest: str | None = None,
        holder: str | None = ANY_HOLDER,
        supersede: str | None = None,
        count: str | None = None,
    ) -> RecordOutcome:
        """Everything one Record changes, as one step: the memory (as :meth:`record`,
        with its claim-group confirmations/contradictions), the supersession of
        ``supersede`` (the claim's holder, when the caller decided the new memory
        replaces it; reason ``superseded by <id>``) with the cascade it starts, and one
        event of the counter ``count`` (e.g. ``calls:<creator>``).

        ``holder``: the claim holder the caller decided against (None: none); when the
        claim is held by another id by now, ClaimMovedError and nothing is written
        (``ANY_HOLDER``, the default: no check; ``supersede`` implies ``holder``).
        ``digest`` (default :func:`record_digest` of ``rec``, its ``created_at`` only when
        set) is kept with the memory:
        a Record of an id that exists with the same digest writes nothing and answers
        the original outcome (``replayed``); another digest is AlreadyExistsError.

        This default composes the primitives under ``self._snapshot`` (no other
        writer of a store whose snapshot is its lock comes in between; each
        primitive is its own write) and answers a replay from what the store holds
        (the successor link and the cascade's history entries). The backends do
        better: Redis does all of it in one script, the embedded store in one op,
        one SQLite transaction."""
        at = self._now(now)
        checked = validate_new(rec, now=at, limits=self.limits)
        digest = digest or record_digest(checked, with_created_at=rec.created_at is not None)
        if supersede is not None:
            holder = supersede
        with self._snapshot:
            if checked.id in self._load(checked.namespace, [checked.id], False):
                return self._replayed(checked, digest)
            claim = checked.claim
            if holder != ANY_HOLDER and claim is not None:
                now_held = self._current_claim_id(checked.namespace, claim[0], claim[1])
                if now_held != holder:
                    raise ClaimMovedError(
                        f"the claim is held by {now_held!r}, not {holder!r}", holder=now_held
                    )
            stored = self.record(checked, now=at)
            if count is not None:
                self.incr_counter(stored.namespace, count, now=at)
            if supersede is None:
                return RecordOutcome(stored)
            result = self.supersede(
                stored.namespace, supersede, stored.id, reason=f"superseded by {stored.id}", now=at
            )
            return RecordOutcome(stored, supersede, tuple(result.affected))

    def _replayed(self, rec: MemoryRecord, digest: str) -> RecordOutcome:
        """The outcome of the earlier Record of ``rec.id`` when it proposed the same
        memory (AlreadyExistsError otherwise), rebuilt from the store: the claim member
        it superseded and the descendants whose history names that cascade."""
        ns = rec.namespace
        stored = self._load(ns, [rec.id])[rec.id]
        if digest not in (record_digest(stored), record_digest(stored, with_created_at=False)):
            raise AlreadyExistsError(f"memory {rec.id!r} already exists", field="id")
        claim = stored.claim
        superseded = next(
            (
                m.id
                for m in (self._claim_group(ns, *claim) if claim else ())
                if m.successor == rec.id and m.status == Status.SUPERSEDED
            ),
            None,
        )
        affected: tuple[str, ...] = ()
        if superseded is not None:
            why = cascade_reason(Status.SUPERSEDED, f"superseded by {rec.id}")
            walk = traversal.walk(
                self._load,
                ns,
                superseded,
                self.limits.max_walk_depth,
                self.limits.max_walk_count,
                up=False,
            )
            affected = tuple(
                r.id
                for r in walk.records
                if any(h.root_id == superseded and h.reason == why for h in r.status_history)
            )
        return RecordOutcome(replace(stored, status_history=()), superseded, affected, True)

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
    ) -> CascadeResult:
        """Atomically check and apply a status change, then cascade if it revokes/supersedes."""

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

    # -- decisions (for Explain and Feedback of any sidecar, after a restart) ---------

    @property
    def keeps_decisions(self) -> bool:
        """True when `keep_decisions` keeps them (this default: False, it keeps none)."""
        return False

    def keep_decisions(self, namespace: str, entries: Sequence[KeptDecision]) -> None:
        """Keep `entries` (decisions of `namespace`, oldest first) in one round trip /
        one transaction, then only the newest `decision_retention` of the namespace;
        an id kept already is not kept twice. This default keeps none."""
        return None

    def kept_decisions(self, namespace: str, memory_id: str, limit: int) -> list[KeptDecision]:
        """The newest (at most `limit`) kept decisions of `namespace` on `memory_id`,
        newest first. This default: none."""
        return []

    def kept_decision(self, namespace: str, decision_id: str) -> KeptDecision | None:
        """The kept decision `decision_id` of `namespace`, or None. This default: None."""
        return None

    def __enter__(self) -> LineageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- status changes ---------------------------------------------------------------

    def set_status(
        self,
        namespace: str,
        memory_id: str,
        status: str | Status,
        *,
        reason: str = "",
        successor: str | None = None,
        expected_version: int | None = None,
        now: float | None = None,
    ) -> CascadeResult:
        """Move a memory along the transition table.

        Revoking or superseding marks every descendant pending_verification
        (history records the reason and this memory as root), following the
        derivation links only: cost is proportional to the descendants touched.
        ``superseded`` requires ``successor``, an existing memory of the namespace.
        """
        ns = self._ns(namespace)
        memory_id = self._id(memory_id)
        target = check_status(status)
        reason = check_reason(reason, self.limits)
        if target is Status.SUPERSEDED:
            if successor is None:
                raise ValidationError(
                    "superseded needs a successor", field="successor", code="MISSING_SUCCESSOR"
                )
            successor = self._id(successor, "successor")
            if successor == memory_id:
                raise ValidationError(
                    "a memory cannot supersede itself", field="successor", code="SELF_SUCCESSOR"
                )
        elif successor is not None:
            raise ValidationError(
                "only a superseded memory has a successor",
                field="successor",
                code="UNEXPECTED_SUCCESSOR",
            )
        if expected_version is not None:
            check_limit(expected_version, "expected_version", 2**62)
        return self._change_status(
            ns,
            memory_id,
            target,
            reason=reason,
            successor=successor,
            expected_version=expected_version,
            now=self._now(now),
            only_from=None,
        )

    def revoke(
        self,
        namespace: str,
        memory_id: str,
        *,
        reason: str = "",
        expected_version: int | None = None,
        now: float | None = None,
    ) -> CascadeResult:
        return self.set_status(
            namespace,
            memory_id,
            Status.REVOKED,
            reason=reason,
            expected_version=expected_version,
            now=now,
        )

    def supersede(
        self,
        namespace: str,
        memory_id: str,
        successor: str,
        *,
        reason: str = "",
        expected_version: int | None = None,
        now: float | None = None,
    ) -> CascadeResult:
        return self.set_status(
            namespace,
            memory_id,
            Status.SUPERSEDED,
            reason=reason,
            successor=successor,
            expected_version=expected_version,
            now=now,
        )

    def confirm(
        self,
        namespace: str,
        memory_id: str,
        *,
        reason: str = "confirmed",
        expected_version: int | None = None,
        now: float | None = None,
    ) -> MemoryRecord:
        """Re-validate a pending_verification memory (only from that status) back to active."""
        ns = self._ns(namespace)
        memory_id = self._id(memory_id)
        reason = check_reason(reason, self.limits)
        if expected_version is not None:
            check_limit(expected_version, "expected_version", 2**62)
        return self._change_status(
            ns,
            memory_id,
            Status.ACTIVE,
            reason=reason,
            successor=None,
            expected_version=expected_version,
            now=self._now(now),
            only_from=frozenset({Status.PENDING_VERIFICATION}),
        ).root

    def update(
        self,
        namespace: str,
        memory_id: str,
        expected_version: int,
        changes: Mapping[str, Any],
        *,
        now: float | None = None,
    ) -> MemoryRecord:
        """Compare-and-set: apply ``changes`` only if the stored version is still
        ``expected_version`` (VersionConflictError otherwise); bumps the version.
        ``now`` only dates the ``updated`` event."""
        ns = self._ns(namespace)
        memory_id = self._id(memory_id)
        check_limit(expected_version, "expected_version", 2**62)
        return self._update(
            ns,
            memory_id,
            expected_version,
            validate_changes(dict(changes), self.limits),
            self._now(now),
        )

    def add_dependencies(
        self,
        namespace: str,
        memory_id: str,
        dependencies: Iterable[Any],
        *,
        expected_version: int,
        now: float | None = None,
    ) -> MemoryRecord:
        """Add dependencies to an existing memory (compare-and-set on its version).

        The only operation that can close a cycle, so it is refused with CycleError
        when a new dependency is the memory itself or one of its descendants.  A
        tainted new dependency moves the memory (and its descendants) to
        pending_verification, as if it had been recorded on it.
        """
        ns = self._ns(namespace)
        memory_id = self._id(memory_id)
        check_limit(expected_version, "expected_version", 2**62)
        deps = check_dependencies(
            list(dependencies), namespace=ns, memory_id=memory_id, limits=self.limits
        )
        if not deps:
            raise ValidationError("no dependency to add", field="dependencies", code="EMPTY_UPDATE")
        return self._add_dependencies(ns, memory_id, deps, expected_version, self._now(now))

    # -- reads ---------------------------------------------------------------------

    def get(self, namespace: str, memory_id: str) -> MemoryRecord:
        ns = self._ns(namespace)
        memory_id = self._id(memory_id)
        found = self._load(ns, [memory_id]).get(memory_id)
        if found is None:
            raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="id")
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

    # -- reliability: claim groups, source statistics, usage feedback ---------------------
    #
    # Recording a claim (subject, attribute, value) by source cX compares it, in the same
    # atomic step, with every other active/pending member of the claim's group: a member
    # from another source with the same value confirms it (both gain the other's source in
    # ``confirmed_by``, both sources one ``ok``), a different value contradicts it (both
    # gain ``contradicted_by``, both sources one ``bad``); same-source members are left to
    # the engine (supersession).  None of this bumps versions or emits events.  The new
    # memory's lists are sorted; a member's list grows in arrival order.

    def claim_group(self, namespace: str, subject: str, attribute: str) -> list[MemoryRecord]:
        """Every memory ever recorded with (subject, attribute), whatever its status,
        ordered by created_at then id."""
        ns = self._ns(namespace)
        check_id(subject, "subject")
        check_id(attribute, "attribute")
        group = self._claim_group(ns, subject, attribute)
        return sorted(group, key=lambda r: (r.created_at or 0.0, r.id))

    def source_stats(
        self, namespace: str, sources: Iterable[str]
    ) -> dict[str, tuple[float, float]]:
        """(ok, bad) counts of each source in ``namespace`` ((0, 0) for an unknown one),
        in one round trip.  ok/bad come from confirmations/contradictions at record time
        and from :meth:`feedback` on the memories the source created."""
        ns = self._ns(namespace)
        wanted = check_sources(sources, self.limits.max_id_length)
        if not wanted:
            return {}
        return self._source_stats(ns, wanted)

    def feedback(
        self, namespace: str, ids: Iterable[str], success: bool, *, now: float | None = None
    ) -> int:
        """A use of the memories ``ids`` succeeded (or failed): atomically bump
        ``uses_ok`` (``uses_failed``) on each existing one and count one ok (bad) for its
        creator.  Unknown ids are ignored; returns how many records were updated.  No
        version bump, no event."""
        if not isinstance(success, bool):
            raise ValidationError("must be true or false", field="success", code="INVALID_FEEDBACK")
        ns = self._ns(namespace)
        wanted = self._ids(ids)
        at = self._now(now)
        return self._feedback(ns, wanted, success, at) if wanted else 0

    # -- review schedule (the tiered governance sweep) -------------------------------------

    def due_for_review(
        self, namespace: str, *, now: float | None = None, limit: int = 1000
    ) -> list[str]:
        """Ids whose next review time is <= ``now``, earliest first (ties by id), at most
        ``limit``.  Cost is proportional to the result, never to the namespace."""
        ns = self._ns(namespace)
        check_limit(limit, "limit", MAX_BATCH_IDS)
        at = self._now(now)
        return self._due_for_review(ns, at, limit) if limit else []

    def schedule_review(
        self, namespace: str, times: Mapping[str, float], *, now: float | None = None
    ) -> int:
        """Set the next review time of each id (existing memories only) and stamp
        ``reviewed_at = now`` on them, atomically; returns how many were scheduled.
        No version bump, no event."""
        ns = self._ns(namespace)
        if not isinstance(times, Mapping):
            raise ValidationError(
                "must map ids to review times", field="times", code="INVALID_TIMES"
            )
        ids = self._ids(times.keys())
        checked = {i: check_time(times[i], f"times[{i}]") for i in ids}
        at = self._now(now)
        return self._schedule_review(ns, checked, at) if checked else 0

    def unschedule_review(self, namespace: str, ids: Iterable[str]) -> int:
        """Take ids off the review schedule (e.g. evicted ones); returns how many were on
        it.  A later :meth:`schedule_review` puts them back."""
        ns = self._ns(namespace)
        wanted = self._ids(ids)
        return self._unschedule_review(ns, wanted) if wanted else 0

    def incr_counter(self, namespace: str, name: str, *, now: float | None = None) -> None:
        """Count one event (e.g. a call of tool:flight_api) at ``now``.

        Events older than ``limits.counter_retention_seconds`` are dropped."""
        self._incr_counter(self._ns(namespace), check_id(name, "name"), self._now(now))

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
        check_id(name, "name")
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
