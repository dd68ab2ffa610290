"""The embedded store's state: every namespace's ``Space`` and the deterministic
apply functions that change it, one per op of the log (shared by live calls and
replay: replaying the log re-runs them, so a cascade over 100,000 descendants is one
log line).  They also produce the lineage events, under the store's lock, so replay
regenerates them with the same per-namespace sequence numbers.

The reliability bookkeeping follows the same rule: a record op carries no
confirmation/contradiction effects, ``apply_record`` recomputes them from the claim
group; feedback / schedule_review / unschedule_review are ops of their own.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Mapping
from typing import Any, cast

from memlineage.lineage.model import (
    CASCADE_MARKS,
    CASCADE_TRIGGERS,
    CLAIM_PEERS,
    CLAIM_RELEASE,
    TAINTED,
    EventType,
    LineageEvent,
    Status,
    StatusChange,
)
from memlineage.lineage.validation import StoreLimits
from memlineage.store.base import cascade_reason
from memlineage.store.embedded.event_log import Wakeups
from memlineage.store.embedded.row import STAMPS, Row
from memlineage.store.embedded.space import Space
from memlineage.store.revisions import revision_reason

PENDING = Status.PENDING_VERIFICATION.value
_MARKS = frozenset(s.value for s in CASCADE_MARKS)
_PEERS = frozenset(s.value for s in CLAIM_PEERS)


class State:
    """Every namespace's state; the caller (the store) holds the lock of ``changed``
    around every call, which wakes the readers waiting for events."""

    def __init__(self, limits: StoreLimits, changed: Wakeups) -> None:
        self.spaces: dict[str, Space] = {}
        self.limits = limits
        self._changed = changed

    def apply(self, op: dict[str, Any]) -> None:
        """Apply one op of the log (as ``EmbeddedStore`` wrote it, or an older form)."""
        kind = op["o"]
        if kind == "r":
            row = Row.from_json(op["r"])
            # logs written before "a": the record's own time (validate_new always sets one)
            at = cast(float, op.get("a", row.created_at))
            self.apply_record(op["n"], row, at, op.get("v", at + self.limits.first_review_seconds))
        elif kind == "R":  # one Record: record, counter, supersession (record_claim)
            self.apply_record_claim(
                op["n"],
                Row.from_json(op["r"]),
                op["a"],
                op["v"],
                op.get("s"),
                op.get("w", ""),
                op.get("k"),
            )
        elif kind == "s":
            self.apply_status(op["n"], op["i"], Status(op["t"]), op["w"], op["u"], op["a"])
        elif kind == "d":
            self.apply_add(op["n"], op["i"], op["d"], op["a"])
        elif kind == "u":
            self.apply_update(op["n"], op["i"], op["c"], op.get("a", 0.0))
        elif kind == "A":
            self.apply_accesses(op["n"], op["m"])
        elif kind == "a":  # logs written before batched access recording
            self.apply_accesses(op["n"], dict.fromkeys(op["i"], (1, op["a"])))
        elif kind == "c":
            self.apply_counter(op["n"], op["k"], op["a"])
        elif kind == "f":
            self.apply_feedback(op["n"], op["i"], op["k"])
        elif kind == "v":
            self.apply_schedule(op["n"], op["t"], op["a"])
        elif kind == "x":
            self.apply_unschedule(op["n"], op["i"])
        elif kind == "V":  # one revision (EmbeddedStore._revise)
            self.apply_revise(op["n"], op["i"], op["r"], op["a"], op["v"])
        else:  # a log of a later version, or a hand-edited op: never skipped silently
            raise ValueError(f"unknown op kind {kind!r}")

    def space(self, ns: str) -> Space:
        sp = self.spaces.get(ns)
        if sp is None:
            sp = self.spaces[ns] = Space(events=deque(maxlen=max(1, self.limits.event_retention)))
        return sp

    def emit(
        self, ns: str, sp: Space, kind: EventType, memory_id: str, at: float, **fields: Any
    ) -> None:
        """Append one event (caller holds the lock) and wake the waiting readers."""
        sp.seq += 1
        sp.events.append(
            LineageEvent(
                cursor=str(sp.seq),
                type=kind.value,
                namespace=ns,
                memory_id=memory_id,
                at=at,
                **fields,
            )
        )
        self._changed.notify(ns)

    @staticmethod
    def _push_history(row: Row, entry: StatusChange, cap: int) -> None:
        history = (*row.status_history, entry)
        if len(history) > cap:
            history = history[len(history) - cap :]
        row.status_history = history

    def history(self, row: Row, entry: StatusChange) -> None:
        self._push_history(row, entry, self.limits.history_length)

    def link_many(
        self, ns: str, rows: list[Row], columns: Mapping[str, list[Any]] | None = None
    ) -> None:
        """``link`` for many rows at once, all of them already in the namespace's rows
        (a snapshot's: a dependency may be a later row), with no claim set (the
        snapshot keeps the claims): derivations, claim groups in record order, then
        the score columns in bulk (from ``columns``, the rows' values per field, where
        given).  A dependency that is not stored raises KeyError."""
        sp = self.space(ns)
        by_id, groups, peers = sp.rows, sp.groups, sp.peers
        for row in rows:
            kid = row.id
            for dep in row.dependencies:
                by_id[dep]._kids.append(kid)
            subject, attribute = row.subject, row.attribute
            if subject is not None and attribute is not None:
                groups.setdefault((subject, attribute), []).append(kid)
                if row.status in _PEERS:
                    peers.setdefault((subject, attribute), {})[kid] = None
        sp.cols.attach_many(rows, columns)

    def link(self, ns: str, row: Row) -> None:
        """Index a row: derivation links of its dependencies, its claim (no event)."""
        sp = self.space(ns)
        sp.rows[row.id] = row
        if row._cols is None:
            sp.cols.attach(row)
        for dep in row.dependencies:
            sp.rows[dep].adopt(row.id)
        claim = row.claim
        if claim is not None:
            sp.claims[claim] = row.id
            sp.groups.setdefault(claim, []).append(row.id)
            self.peer_again(sp, row)

    @staticmethod
    def peer_again(sp: Space, row: Row) -> None:
        """`row` is (again) active or pending_verification: recorded, confirmed, or
        marked by a cascade or a tainted dependency (maybe from archived or compressed,
        after a Record of its claim dropped it): new claims compare with it. Idempotent:
        every change to a peer status calls it."""
        claim = row.claim
        if claim is not None:
            sp.peers.setdefault(claim, {})[row.id] = None

    def compare_claims(self, sp: Space, row: Row) -> None:
        """Confirm/contradict the new row against the live members of its claim group
        (`Space.peers`; members met that are no longer live are dropped from it)."""
        claim = row.claim
        members = sp.peers.get(claim) if claim is not None else None
        if not members:
            return
        cx, value, rows, sources = row.creator_id, row.value, sp.rows, sp.sources
        gone: list[str] = []
        for member_id in members:
            y = rows[member_id]
            cy = y.creator_id
            if y.status not in _PEERS:
                gone.append(member_id)
                continue
            if cy == cx:
                continue
            name, k = ("confirmed_by", 0) if y.value == value else ("contradicted_by", 1)
            theirs = getattr(y, name)
            if cx not in theirs:
                setattr(y, name, (*theirs, cx))
            ours = getattr(row, name)
            if cy not in ours:
                setattr(row, name, (*ours, cy))
            sources.setdefault(cx, [0.0, 0.0])[k] += 1.0
            sources.setdefault(cy, [0.0, 0.0])[k] += 1.0
            sp.source_written[cx] = sp.source_written[cy] = next(STAMPS)
        for member_id in gone:
            del members[member_id]
        # The new memory's own lists are sorted (members' lists are in arrival order).
        row.confirmed_by = tuple(sorted(row.confirmed_by))
        row.contradicted_by = tuple(sorted(row.contradicted_by))

    def apply_record(self, ns: str, row: Row, at: float, review_at: float) -> None:
        self.compare_claims(self.space(ns), row)
        self.link(ns, row)
        self.spaces[ns].review.schedule(row.id, review_at)
        taint = row.status_history[-1] if row.status_history else None
        self.emit(
            ns,
            self.spaces[ns],
            EventType.RECORDED,
            row.id,
            at,
            status=row.status,
            version=row.version,
            affected=tuple(row.dependencies),
            root_id=taint.root_id if taint else None,
            reason=taint.reason if taint else "",
        )

    def apply_record_claim(
        self,
        ns: str,
        row: Row,
        at: float,
        review_at: float,
        supersede: str | None,
        reason: str,
        count: str | None,
    ) -> list[str]:
        """One Record as one op (``EmbeddedStore.record_claim``): the record with its
        claim comparison, one event of the counter ``count``, then the supersession of
        ``supersede`` by the new row with its cascade, in the order (and so with the
        events) of the primitives composed one after the other.  The store checked
        everything first: nothing here refuses.  Returns the ids the cascade marked."""
        self.apply_record(ns, row, at, review_at)
        if count is not None:
            self.apply_counter(ns, count, at)
        if supersede is None:
            return []
        affected, _ = self.apply_status(ns, supersede, Status.SUPERSEDED, reason, row.id, at)
        return affected

    def apply_status(
        self,
        ns: str,
        memory_id: str,
        target: Status,
        reason: str,
        successor: str | None,
        now: float,
    ) -> tuple[list[str], int]:
        sp = self.spaces[ns]
        row = sp.rows[memory_id]
        previous = row.status
        self.history(row, StatusChange(now, previous, target.value, reason, memory_id))
        row.status = target.value
        row.version += 1
        if target.value in _PEERS:
            self.peer_again(sp, row)
        if target is Status.SUPERSEDED:
            row.successor = successor
        claim = row.claim
        if target in CLAIM_RELEASE and claim is not None and sp.claims.get(claim) == memory_id:
            del sp.claims[claim]
        self.emit(
            ns,
            sp,
            EventType.STATUS_CHANGED,
            memory_id,
            now,
            status=target.value,
            previous_status=previous,
            reason=reason,
            version=row.version,
            successor=successor if target is Status.SUPERSEDED else None,
        )
        if target not in CASCADE_TRIGGERS:
            return [], 0
        why = cascade_reason(target, reason)
        affected, visited = self._mark_descendants(sp, memory_id, memory_id, why, now)
        if affected:
            self.emit(
                ns,
                sp,
                EventType.CASCADED,
                memory_id,
                now,
                root_id=memory_id,
                status=target.value,
                reason=why,
                affected=tuple(affected),
            )
        return affected, visited

    def _mark_descendants(
        self, sp: Space, start: str, root: str, why: str, now: float
    ) -> tuple[list[str], int]:
        """BFS over derivations from ``start``: cost is the descendants, never the store.

        Returns the ids re-marked pending_verification (BFS order) and how many
        descendants were visited."""
        rows, limit = sp.rows, self.limits.history_length
        seen = {start}
        queue = deque(rows[start]._kids)
        affected: list[str] = []
        # One history entry per previous status, shared (entries are immutable): the
        # cascade's cost is then the walk and three fields a row
        entries = {status: StatusChange(now, status, PENDING, why, root) for status in _MARKS}
        while queue:
            child = queue.popleft()
            if child in seen:
                continue
            seen.add(child)
            r = rows[child]
            entry = entries.get(r.status)
            if entry is not None:
                r.mark(PENDING, entry, limit)
                self.peer_again(sp, r)
                affected.append(child)
            queue.extend(r._kids)
        return affected, len(seen) - 1

    def apply_add(self, ns: str, memory_id: str, deps: list[str], now: float) -> None:
        sp = self.spaces[ns]
        row = sp.rows[memory_id]
        row.dependencies = tuple(row.dependencies) + tuple(deps)
        row.version += 1
        for dep in deps:
            sp.rows[dep].adopt(memory_id)
        self.emit(ns, sp, EventType.UPDATED, memory_id, now, version=row.version)
        tainted = next((d for d in deps if sp.rows[d].status in TAINTED), None)
        if tainted is not None and row.status in _MARKS:
            why = f"dependency {sp.rows[tainted].status}"
            previous = row.status
            self.history(row, StatusChange(now, previous, PENDING, why, tainted))
            row.status = PENDING
            self.peer_again(sp, row)
            self.emit(
                ns,
                sp,
                EventType.STATUS_CHANGED,
                memory_id,
                now,
                root_id=tainted,
                status=PENDING,
                previous_status=previous,
                reason=why,
                version=row.version,
            )
            affected, _ = self._mark_descendants(sp, memory_id, tainted, why, now)
            if affected:
                self.emit(
                    ns,
                    sp,
                    EventType.CASCADED,
                    memory_id,
                    now,
                    root_id=tainted,
                    status=sp.rows[tainted].status,
                    reason=why,
                    affected=tuple(affected),
                )

    def apply_revise(
        self, ns: str, memory_id: str, new: dict[str, Any], at: float, review_at: float
    ) -> list[str]:
        """One revision (``EmbeddedStore._revise`` checked it under the lock): the
        version replaced is kept (``Space.versions``, its row JSON without history),
        the derivation links follow the new dependencies, the new fields are set, the
        status is worked out again (pending_verification on a tainted dependency, else
        active), then one ``updated`` event and the cascade over every descendant.
        Returns the ids the cascade marked."""
        sp = self.spaces[ns]
        rows = sp.rows
        row = rows[memory_id]
        kept = row.to_json()
        kept["status_history"] = []
        sp.versions.setdefault(memory_id, []).append(kept)
        previous, was = row.version, row.status
        old_deps = row.dependencies
        deps = tuple(new["dependencies"])
        for dep in old_deps:
            if dep not in deps:
                rows[dep].disown(memory_id)
        for dep in deps:
            if dep not in old_deps:
                rows[dep].adopt(memory_id)
        if new["value"] != row.value or new["creator_id"] != row.creator_id:
            row.confirmed_by = ()  # another assertion: the old comparisons no longer hold
            row.contradicted_by = ()
        for name, value in new.items():
            setattr(row, name, tuple(value) if name in ("tags", "dependencies") else value)
        taint = next((d for d in deps if rows[d].status in TAINTED), None)
        status = PENDING if taint is not None else Status.ACTIVE.value
        if status != was:
            why = f"dependency {rows[taint].status}" if taint is not None else "revised"
            self.history(row, StatusChange(at, was, status, why, taint or memory_id))
            row.status = status
            self.peer_again(sp, row)
        row.version = previous + 1
        sp.review.schedule(memory_id, review_at)
        self.emit(
            ns,
            sp,
            EventType.UPDATED,
            memory_id,
            at,
            status=status,
            previous_status=was,
            version=row.version,
            affected=deps,
            root_id=taint,
            reason=f"revised: version {previous} replaced",
        )
        why = revision_reason(previous)
        affected, _ = self._mark_descendants(sp, memory_id, memory_id, why, at)
        if affected:
            self.emit(
                ns,
                sp,
                EventType.CASCADED,
                memory_id,
                at,
                root_id=memory_id,
                status=status,
                reason=why,
                affected=tuple(affected),
            )
        return affected

    def apply_update(self, ns: str, memory_id: str, changes: dict[str, Any], now: float) -> None:
        sp = self.spaces[ns]
        row = sp.rows[memory_id]
        for name, value in changes.items():
            setattr(row, name, tuple(value) if name == "tags" else value)
        row.version += 1
        self.emit(ns, sp, EventType.UPDATED, memory_id, now, version=row.version)

    def apply_accesses(self, ns: str, accesses: dict[str, Any]) -> int:
        """``accesses``: id -> (count, time); only the touched rows' caches drop."""
        sp = self.spaces.get(ns)
        if sp is None:
            return 0
        hit = 0
        rows = sp.rows
        for memory_id, (count, at) in accesses.items():
            row = rows.get(memory_id)
            if row is not None:
                row.access_count += count
                if row.last_access is None or at > row.last_access:
                    row.last_access = at
                hit += 1
        return hit

    def apply_feedback(self, ns: str, ids: list[str], success: bool) -> int:
        sp = self.spaces.get(ns)
        if sp is None:
            return 0
        hit, k = 0, 0 if success else 1
        for memory_id in ids:
            row = sp.rows.get(memory_id)
            if row is None:
                continue
            if success:
                row.uses_ok += 1
            else:
                row.uses_failed += 1
            sp.sources.setdefault(row.creator_id, [0.0, 0.0])[k] += 1.0
            sp.source_written[row.creator_id] = next(STAMPS)
            hit += 1
        return hit

    def apply_schedule(self, ns: str, times: dict[str, float], now: float) -> int:
        sp = self.spaces.get(ns)
        if sp is None:
            return 0
        hit = 0
        for memory_id, at in times.items():
            row = sp.rows.get(memory_id)
            if row is None:
                continue
            sp.review.schedule(memory_id, at)
            row.reviewed_at = now
            hit += 1
        return hit

    def apply_unschedule(self, ns: str, ids: list[str]) -> int:
        sp = self.spaces.get(ns)
        if sp is None:
            return 0
        return sum(sp.review.unschedule(memory_id) for memory_id in ids)

    def apply_counter(self, ns: str, name: str, now: float) -> None:
        times = self.space(ns).counters.setdefault(name, [])
        bisect.insort(times, now)
        cut = bisect.bisect_left(times, now - self.limits.counter_retention_seconds)
        if cut:
            del times[:cut]
