"""In-process store: the zero-setup default, optionally persistent.

State lives in per-namespace ``Space``s (``state.State``) behind one re-entrant
lock (so a namespace can never see another's keys by construction).  Every
primitive checks under the lock, hands the op to the log (``persistence.SqliteLog``,
with a data directory: committed to SQLite, write-ahead) and applies it with the same
deterministic apply function that replays it.

Reads hand out frozen MemoryRecords cached on each row (see ``row.Row``): built on
the first read after a change, then the same object until the row, its history
or its derivations change; an access flush (``record_accesses``) drops only the
touched rows' copies.

Lineage events are produced by the same apply functions, under the same lock,
from the same op: replay regenerates them with the same per-namespace sequence
numbers (the cursors), and the snapshot carries the retained events and the
sequence, so a restart resumes every reader's cursor.

A data directory that cannot be read back as written (a changed byte, a hand-edited
op, a truncated file) refuses to open: ``StoreCorruptError``, the file untouched.

Three of its parts live in mixins it inherits: the one-op ``record_claim``
(``claim_record``), the one-op revision (``revision``) and the lineage-event reads
(``event_log``).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from memlineage.lineage.clock import Clock, system_clock
from memlineage.lineage.columns import ScoreColumns, score_columns_of
from memlineage.lineage.decisions import KeptDecision
from memlineage.lineage.errors import (
    AlreadyExistsError,
    CycleError,
    NotFoundError,
    TransitionError,
    UnknownDependencyError,
    VersionConflictError,
)
from memlineage.lineage.grants import GrantRecord
from memlineage.lineage.model import EVICTION_BLOCKERS as BLOCKERS
from memlineage.lineage.model import CascadeResult, EventType, MemoryRecord, Status
from memlineage.lineage.proposals import Proposal
from memlineage.lineage.validation import (
    StoreLimits,
    check_dependencies,
    check_transition,
    validate_new,
)
from memlineage.store.base import MAX_BATCH_IDS, LineageStore
from memlineage.store.changes import live_derivations
from memlineage.store.embedded import persistence
from memlineage.store.embedded.claim_record import ClaimRecordMixin
from memlineage.store.embedded.event_log import EventLogMixin, Wakeups
from memlineage.store.embedded.grant_table import GrantTable
from memlineage.store.embedded.persistence import SqliteLog, Summary
from memlineage.store.embedded.proposal_table import ProposalTable
from memlineage.store.embedded.revision import RevisionMixin
from memlineage.store.embedded.row import STAMPS, Row
from memlineage.store.embedded.state import State
from memlineage.store.grants import MAX_GRANTS_PER_NAMESPACE
from memlineage.store.window import change_of, count_in

# Ops that change neither what a memory is nor how it is counted: the review schedule.
_SCHEDULE_OPS = frozenset({"v", "x"})


def _check_version(memory_id: str, actual: int, expected: int) -> None:
    """Compare-and-set: a stale version is refused, never silently overwritten."""
    if actual != expected:
        raise VersionConflictError(
            f"memory {memory_id!r} is at version {actual}, not {expected}",
            expected=expected,
            actual=actual,
        )


class EmbeddedStore(ClaimRecordMixin, RevisionMixin, EventLogMixin, LineageStore):
    """Thread-safe in-process backend; pass ``data_dir`` to survive restarts;
    ``max_grants``: the grants a namespace holds at most (a smaller one for tests)."""

    kind = "embedded"
    shares_records = True
    epoch: int
    access_epoch: int

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        clock: Clock = system_clock,
        limits: StoreLimits | None = None,
        fsync: bool = False,
        max_grants: int = MAX_GRANTS_PER_NAMESPACE,
    ):
        super().__init__(clock=clock, limits=limits)
        self._lock = threading.RLock()
        self._snapshot = self._lock  # traversals hold the lock: a consistent snapshot
        self._changed = Wakeups(self._lock)
        self._state = State(self.limits, self._changed)
        self._spaces = self._state.spaces
        self.epoch = 0
        self.access_epoch = 0
        self._dir = os.fspath(data_dir) if data_dir is not None else None
        self._log = SqliteLog(data_dir, fsync=fsync) if data_dir is not None else None
        if self._log is not None:
            with self._lock:
                self._log.open(self._state)
        path = self._log.path if self._log is not None else None
        head = self._log.head if self._log is not None else None
        kept = self._log.kept if self._log is not None else None
        try:  # a damaged row refuses the open (StoreCorruptError): nothing is left open
            self._grant_table = GrantTable(path, fsync, max_grants, head=head, kept=kept)
            try:
                self._proposal_table = ProposalTable(path, fsync, head=head, kept=kept)
            except BaseException:
                self._grant_table.close()
                raise
        except BaseException:
            if self._log is not None:
                self._log.close()
            raise

    # -- persistence (all of it in ``persistence.SqliteLog``) ----------------------

    def durability(self) -> str:
        if self._log is None:
            return "nothing: in memory only (give a data directory to persist)"
        with self._lock:
            synced = self._log.synced_commits()
        if synced:
            return "a killed process and a power loss (fsync at every commit)"
        return "a killed process, not a power loss (no fsync per commit; `fsync` adds it)"

    def _append(self, op: dict[str, Any]) -> None:
        """Write-ahead: the op is committed to SQLite (synchronous=NORMAL, or FULL
        with ``fsync``) before it is applied; a failed write raises
        StoreUnavailableError and nothing is applied.
        Every write passes here, under the lock: the write counters move here too, once
        the op is committed (a refused write moves none, nor makes its namespace)."""
        if self._log is not None:
            self._log.append(op)
        kind = op["o"]
        if kind == "A":
            self.access_epoch += 1
        elif kind not in _SCHEDULE_OPS:
            self.epoch += 1
            # What rows do not show moves namespace-wide: rate counters (a Record "R"
            # may count its creator). Source statistics are stamped per source where
            # they change (`State.compare_claims`, `State.apply_feedback`).
            if kind == "c" or (kind == "R" and op.get("k") is not None):
                self._state.space(op["n"]).counted = STAMPS.__next__()

    def ping(self) -> bool:
        """False once the database is no longer at its path (removed or replaced while
        serving, `file_watch`): health NOT_SERVING, as every write is refused."""
        return self._log is None or self._log.there()

    def change_mark(self) -> int:
        """A change stamp: a row or namespace statistic stamped at or after it has
        changed since (`unchanged_since`). Take it before reading."""
        return STAMPS.__next__()

    def unchanged_since(
        self,
        namespace: str,
        ids: Iterable[str],
        mark: int,
        *,
        access: bool = False,
        counters: bool = False,
    ) -> bool:
        """Nothing the records ``ids`` hold (their access statistics with ``access``),
        nor the source statistics of their sources (nor the namespace's rate counters,
        with ``counters``), changed since ``mark``; a record gone is a change. A
        record's sources are its creator and the sources that confirmed or contradicted
        it: a record's reliability weighs each by its credibility (`scoring.batch.
        sources_of`)."""
        sp = self._spaces.get(namespace)
        if sp is None or (counters and sp.counted >= mark):
            return False
        rows, sources = sp.rows, sp.source_written
        for memory_id in ids:
            row = rows.get(memory_id)
            if row is None or row.written >= mark or (access and row.accessed >= mark):
                return False
            if sources and (
                sources.get(row.creator_id, 0) >= mark
                or any(sources.get(s, 0) >= mark for s in row.confirmed_by)
                or any(sources.get(s, 0) >= mark for s in row.contradicted_by)
            ):
                return False
        return True

    def compact(self) -> None:
        """Snapshot the whole state into the database, replacing the ops it covers
        (one transaction): the next open replays only what came after."""
        if self._log is None:
            return
        with self._lock:
            self._log.compact(self._state)

    def busy(self) -> bool:
        """Another thread holds the store's lock (one probe, never waits)."""
        if self._lock.acquire(blocking=False):
            self._lock.release()
            return False
        return True

    def maybe_compact(self, max_log_bytes: int) -> bool:
        """Snapshot when the ops written since the last snapshot exceed `max_log_bytes`
        of JSON text (the server calls this periodically: every access flush is an op),
        so a restart's replay stays bounded."""
        with self._lock:
            oplog = self._log
            size = oplog.size() if oplog is not None and oplog.fold_due() else None
            if size is None or size <= max_log_bytes:
                return False
        self.compact()
        return True

    # -- grants: in memory, written through to the database (``GrantTable``) --------
    def _put_grant(self, grant: GrantRecord, now: float) -> None:
        self._grant_table.put(grant, now)

    def _grants(self, namespace: str) -> list[GrantRecord]:
        return self._grant_table.grants(namespace)

    def _use_grants(self, namespace: str, ids: list[str], now: float) -> bool:
        return self._grant_table.use(namespace, ids, now)

    # -- proposals: in memory, written through (``ProposalTable``); events under the lock
    def _save_proposal(
        self, ns: str, p: Proposal, event: str | None, now: float, replacing: Proposal | None
    ) -> bool:
        with self._lock:
            if replacing is not None and self._proposal_table.get(ns, p.memory_id) != replacing:
                return False
            self._proposal_table.save(p)
            if event is None:
                return True
            fields: dict[str, Any] = {
                "status": p.to_status,
                "previous_status": p.from_status,
                "deadline": p.deadline,
            }
            if event == "proposed":
                fields.update(reason=p.reason, affected=p.owners)
            elif p.objections:
                fields.update(root_id=p.objections[-1].by, reason=p.objections[-1].reason)
            self._state.emit(
                ns, self._state.space(ns), EventType(event), p.memory_id, now, **fields
            )
            return True

    def _proposal(self, ns: str, memory_id: str) -> Proposal | None:
        return self._proposal_table.get(ns, memory_id)

    def _drop_proposal(self, ns: str, memory_id: str) -> None:
        self._proposal_table.drop(ns, memory_id)

    # -- kept decisions: with a data directory, in its database (``DecisionTable``) ----

    @property
    def keeps_decisions(self) -> bool:
        """With a data directory; in memory the engine's journal is the only copy."""
        return self._log is not None

    def keep_decisions(self, namespace: str, entries: Sequence[KeptDecision]) -> None:
        table = self._log.decisions if self._log is not None else None
        if table is not None:
            table.keep(namespace, entries, self.decision_retention)

    def kept_decisions(self, namespace: str, memory_id: str, limit: int) -> list[KeptDecision]:
        table = self._log.decisions if self._log is not None else None
        return table.recent(namespace, memory_id, limit) if table is not None else []

    def kept_decision(self, namespace: str, decision_id: str) -> KeptDecision | None:
        table = self._log.decisions if self._log is not None else None
        return table.get(namespace, decision_id) if table is not None else None

    def close(self) -> None:
        with self._lock:
            self._grant_table.close()
            self._proposal_table.close()
            if self._log is not None:
                self._log.close()

    def check(self) -> Summary:
        """Check the data directory's database read-only, as an open does (the
        committed state, on its own connection): ``StoreCorruptError`` on a problem."""
        if self._dir is None:
            raise ValueError("an in-memory embedded store has nothing on disk to check")
        return persistence.check(self._dir, self.limits)

    def backup(self, dest: str | os.PathLike[str]) -> Summary:
        """Copy the database into the new directory ``dest`` while the store keeps
        serving (SQLite online backup, on its own connection); returns the copy's check."""
        if self._dir is None:
            raise ValueError("an in-memory embedded store has nothing on disk to back up")
        return persistence.backup(self._dir, dest)

    # -- primitives -----------------------------------------------------------------

    def _get_row(self, ns: str, memory_id: str) -> Row:
        sp = self._spaces.get(ns)
        row = sp.rows.get(memory_id) if sp is not None else None
        if row is None:
            raise NotFoundError(f"no memory {memory_id!r} in this namespace", field="memory_id")
        return row

    def record(self, rec: MemoryRecord, *, now: float | None = None) -> MemoryRecord:
        at = self._now(now)
        rec = validate_new(rec, now=at, limits=self.limits)
        with self._lock:
            sp = self._spaces.get(rec.namespace)
            rows = sp.rows if sp is not None else {}
            if rec.id in rows:
                raise AlreadyExistsError(f"memory {rec.id!r} already exists", field="id")
            row = self._new_row(rec, at, rows)
            review_at = at + self.limits.first_review_seconds
            self._append(
                {"o": "r", "n": rec.namespace, "r": row.to_json(), "a": at, "v": review_at}
            )
            self._state.apply_record(rec.namespace, row, at, review_at)
            return row.record()

    def _bulk_load(
        self, namespace: str, records: Iterable[MemoryRecord], *, review_at: float
    ) -> int:
        """Benches and tests only: insert many plain records fast, bypassing validation,
        dependency checks, claim comparison, events and the op log.

        Each record must be new, valid and without claim; its dependencies (if any)
        must be earlier records (their derivations are linked, the records'
        ``derivations`` ignored); all are scheduled for review at ``review_at``.  The
        score columns are kept as for any other write.  Refused on a persistent store (the rows
        would not be in its log).  Returns how many were loaded."""
        if self._log is not None:
            raise RuntimeError("_bulk_load is for in-memory stores only")
        with self._lock:
            self.epoch += 1
            sp = self._state.space(namespace)
            rows, nxt, attach = sp.rows, sp.review.next, sp.cols.attach
            n = 0
            for rec in records:
                row = Row.from_record(rec)
                rows[row.id] = row
                attach(row)
                for dep in row.dependencies:  # earlier records of this load: derivations
                    rows[dep].adopt(row.id)
                nxt[row.id] = review_at
                n += 1
            sp.review.rebuild()
            return n

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
        with self._lock:
            row = self._get_row(namespace, memory_id)
            if expected_version is not None:
                _check_version(memory_id, row.version, expected_version)
            if only_from is not None and Status(row.status) not in only_from:
                raise TransitionError(
                    f"memory {memory_id!r} is {row.status}, only "
                    f"{'/'.join(sorted(only_from))} can become {target.value} this way",
                    current=row.status,
                    requested=target.value,
                )
            check_transition(row.status, target, memory_id)
            if idle_only:  # under the lock: no child is recorded meanwhile
                rows = self._spaces[namespace].rows
                live = [c for c in row.record().derivations if rows[c].status in BLOCKERS]
                if live:
                    raise live_derivations(memory_id, row.status, target, live)
            if successor is not None and successor not in self._spaces[namespace].rows:
                raise NotFoundError(f"no memory {successor!r} in this namespace", field="successor")
            self._append(
                {
                    "o": "s",
                    "n": namespace,
                    "i": memory_id,
                    "t": target.value,
                    "w": reason,
                    "u": successor,
                    "a": now,
                }
            )
            affected, visited = self._state.apply_status(
                namespace, memory_id, target, reason, successor, now
            )
            root = row.record()
            return CascadeResult(
                root=root, marked=len(affected), visited=visited, affected=tuple(affected)
            )

    def _update(
        self,
        namespace: str,
        memory_id: str,
        expected_version: int,
        changes: dict[str, Any],
        now: float,
    ) -> MemoryRecord:
        with self._lock:
            row = self._get_row(namespace, memory_id)
            _check_version(memory_id, row.version, expected_version)
            self._append({"o": "u", "n": namespace, "i": memory_id, "c": changes, "a": now})
            self._state.apply_update(namespace, memory_id, changes, now)
            return row.record()

    def _add_dependencies(
        self,
        namespace: str,
        memory_id: str,
        deps: tuple[str, ...],
        expected_version: int,
        now: float,
    ) -> MemoryRecord:
        with self._lock:
            row = self._get_row(namespace, memory_id)
            _check_version(memory_id, row.version, expected_version)
            deps = check_dependencies(
                deps,
                namespace=namespace,
                memory_id=memory_id,
                limits=self.limits,
                existing=tuple(row.dependencies),
            )
            rows = self._spaces[namespace].rows
            for i, dep in enumerate(deps):
                if dep not in rows:
                    raise UnknownDependencyError(
                        f"no memory {dep!r} in this namespace", field=f"dependencies[{i}]"
                    )
            seen: set[str] = set()
            for i, dep in enumerate(deps):  # a cycle iff memory_id is an ancestor of dep
                stack = [dep]
                while stack:
                    node = stack.pop()
                    if node == memory_id:
                        raise CycleError(
                            f"{memory_id!r} is an ancestor of {dep!r}", field=f"dependencies[{i}]"
                        )
                    if node not in seen:
                        seen.add(node)
                        stack.extend(rows[node].dependencies)
            self._append({"o": "d", "n": namespace, "i": memory_id, "d": list(deps), "a": now})
            self._state.apply_add(namespace, memory_id, list(deps), now)
            return row.record()

    def _load(
        self, namespace: str, ids: list[str], with_history: bool = True
    ) -> dict[str, MemoryRecord]:
        with self._lock:
            sp = self._spaces.get(namespace)
            if sp is None:
                return {}
            rows = sp.rows
            out: dict[str, MemoryRecord] = {}
            if with_history:
                for memory_id in ids:
                    row = rows.get(memory_id)
                    if row is not None:
                        out[memory_id] = row._rec or row.record()
            else:
                for memory_id in ids:
                    row = rows.get(memory_id)
                    if row is not None:
                        out[memory_id] = (row._rec and row._bare) or row.bare()
            return out

    def score_columns(self, namespace: str, ids: Iterable[str]) -> ScoreColumns:
        """Columnar: ``np.take`` on the namespace's columns (``score_mirror.Columns``).
        A batch of distinct stored ids (the sweep's) skips id validation: they were
        validated when recorded (``Columns.rows_of``); any other batch is checked as
        every store call checks it."""
        ns = self._ns(namespace)
        if type(ids) is list and len(ids) <= MAX_BATCH_IDS:
            with self._lock:
                sp = self._spaces.get(ns)
                if sp is not None:
                    at = sp.cols.rows_of(ids)
                    if at is not None:
                        return sp.cols.take(list(ids), at)
        wanted = self._ids(ids)
        with self._lock:
            sp = self._spaces.get(ns)
            if sp is None:
                return score_columns_of(())
            return sp.cols.take(wanted)

    def _current_claim_id(self, namespace: str, subject: str, attribute: str) -> str | None:
        with self._lock:
            sp = self._spaces.get(namespace)
            return sp.claims.get((subject, attribute)) if sp is not None else None

    def _record_accesses(self, namespace: str, accesses: dict[str, tuple[int, float]]) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            if sp is None:
                return 0
            rows = sp.rows
            live = {i: a for i, a in accesses.items() if i in rows}
            if not live:
                return 0
            self._append({"o": "A", "n": namespace, "m": live})
            return self._state.apply_accesses(namespace, live)

    def _incr_counter(self, namespace: str, name: str, now: float) -> None:
        with self._lock:
            self._append({"o": "c", "n": namespace, "k": name, "a": now})
            self._state.apply_counter(namespace, name, now)

    def _claim_group(self, namespace: str, subject: str, attribute: str) -> list[MemoryRecord]:
        with self._lock:
            sp = self._spaces.get(namespace)
            if sp is None:
                return []
            return [sp.rows[i].record() for i in sp.groups.get((subject, attribute), ())]

    def _source_stats(self, namespace: str, sources: list[str]) -> dict[str, tuple[float, float]]:
        with self._lock:
            sp = self._spaces.get(namespace)
            known = sp.sources if sp is not None else {}
            out: dict[str, tuple[float, float]] = {}
            for source in sources:
                ok, bad = known.get(source, (0.0, 0.0))
                out[source] = (ok, bad)
            return out

    def _feedback(self, namespace: str, ids: list[str], success: bool, now: float) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            live = [i for i in ids if sp is not None and i in sp.rows]
            if not live:
                return 0
            self._append({"o": "f", "n": namespace, "i": live, "k": success, "a": now})
            return self._state.apply_feedback(namespace, live, success)

    def _due_for_review(self, namespace: str, now: float, limit: int) -> list[str]:
        with self._lock:
            sp = self._spaces.get(namespace)
            return sp.review.due(now, limit) if sp is not None else []

    def _schedule_review(self, namespace: str, times: dict[str, float], now: float) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            live = {i: t for i, t in times.items() if sp is not None and i in sp.rows}
            if not live:
                return 0
            self._append({"o": "v", "n": namespace, "t": live, "a": now})
            return self._state.apply_schedule(namespace, live, now)

    def _unschedule_review(self, namespace: str, ids: list[str]) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            live = [i for i in ids if sp is not None and i in sp.review.next]
            if not live:
                return 0
            self._append({"o": "x", "n": namespace, "i": live})
            return self._state.apply_unschedule(namespace, live)

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(ns for ns, sp in self._spaces.items() if sp.rows)

    def _count_change(self, namespace: str, name: str, window: float, now: float) -> float:
        with self._lock:
            sp = self._spaces.get(namespace)
            times = sp.counters.get(name) if sp is not None else None
            return change_of(times, window, now) if times else math.inf

    def _count(self, namespace: str, name: str, since: float, now: float) -> int:
        with self._lock:
            sp = self._spaces.get(namespace)
            times = sp.counters.get(name) if sp is not None else None
            return count_in(times, since, now) if times else 0
