"""The embedded store's one-op Record (``record_claim``): the memory, its claim
comparison, the creator's counter and the supersession with its cascade as ONE op
("R"), checked under the lock before it is written; and the row it writes
(``_new_row``).  A mixin of ``EmbeddedStore`` (``store``), relying on the attributes
its ``__init__`` sets.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

from memlineage.lineage.errors import UnknownDependencyError, ValidationError
from memlineage.lineage.model import TAINTED, MemoryRecord, Status, StatusChange
from memlineage.lineage.validation import check_reason, check_transition, validate_new
from memlineage.store.base import (
    ANY_HOLDER,
    ClaimMovedError,
    LineageStore,
    RecordOutcome,
    record_digest,
)
from memlineage.store.embedded.row import Row
from memlineage.store.embedded.space import Space
from memlineage.store.embedded.state import PENDING, State


class ClaimRecordMixin(LineageStore):
    """``record_claim`` as one op; the attributes and methods below are
    ``EmbeddedStore``'s."""

    _lock: threading.RLock
    _state: State
    _spaces: dict[str, Space]

    if TYPE_CHECKING:

        def _append(self, op: dict[str, Any]) -> None: ...

        def _get_row(self, ns: str, memory_id: str) -> Row: ...

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
        """One Record as ONE op ("R", one SQLite transaction, one apply:
        ``State.apply_record_claim``): the memory with its claim comparison, the
        counter ``count`` and the supersession of ``supersede`` with its cascade (see
        ``LineageStore.record_claim``).  Everything that can refuse is checked under
        the lock before the op is written, in the order the composed primitives check
        it (replay, claim holder, dependencies, counter name, the supersession), so a
        refusal writes nothing and a killed process leaves all of it or none.  An
        identical retry answers the original outcome from what the store holds."""
        at = self._now(now)
        checked = validate_new(rec, now=at, limits=self.limits)
        digest = digest or record_digest(checked, with_created_at=rec.created_at is not None)
        if supersede is not None:
            holder = supersede
        ns, new_id = checked.namespace, checked.id
        with self._lock:
            sp = self._spaces.get(ns)
            rows = sp.rows if sp is not None else {}
            if new_id in rows:
                return self._replayed(checked, digest)
            claim = checked.claim
            if holder != ANY_HOLDER and claim is not None:
                now_held = sp.claims.get(claim) if sp is not None else None
                if now_held != holder:
                    raise ClaimMovedError(
                        f"the claim is held by {now_held!r}, not {holder!r}", holder=now_held
                    )
            row = self._new_row(checked, at, rows)
            if count is not None:
                count = self._counter(count)
            reason = f"superseded by {new_id}"
            if supersede is not None:  # as set_status / _change_status check it
                supersede = self._id(supersede)
                reason = check_reason(reason, self.limits)
                if supersede == new_id:
                    raise ValidationError(
                        "a memory cannot supersede itself", field="successor", code="SELF_SUCCESSOR"
                    )
                old = self._get_row(ns, supersede)
                check_transition(old.status, Status.SUPERSEDED, supersede)
            review_at = at + self.limits.first_review_seconds
            op: dict[str, Any] = {"o": "R", "n": ns, "r": row.to_json(), "a": at, "v": review_at}
            if supersede is not None:
                op["s"], op["w"] = supersede, reason
            if count is not None:
                op["k"] = count
            self._append(op)
            affected = self._state.apply_record_claim(
                ns, row, at, review_at, supersede, reason, count
            )
            # The memory as stored after the whole step (pending when the cascade it
            # started reached it: it was derived from the old holder's lineage).
            return RecordOutcome(row.record(), supersede, tuple(affected))

    def _new_row(self, rec: MemoryRecord, at: float, rows: dict[str, Row]) -> Row:
        """The row ``record`` would write for the validated ``rec``: its dependencies
        checked, pending_verification on a tainted one (the lock held)."""
        taint: tuple[str, str] | None = None
        # validate_new resolved every MemoryRef: the dependencies are plain ids
        for i, dep in enumerate(cast("tuple[str, ...]", rec.dependencies)):
            parent = rows.get(dep)
            if parent is None:
                raise UnknownDependencyError(
                    f"no memory {dep!r} in this namespace", field=f"dependencies[{i}]"
                )
            if taint is None and parent.status in TAINTED:
                taint = (dep, parent.status)
        row = Row.from_record(rec)
        if taint is not None and row.status != PENDING:
            row.status_history = (
                *row.status_history,
                StatusChange(at, row.status, PENDING, f"dependency {taint[1]}", taint[0]),
            )
            row.status = PENDING
        return row
