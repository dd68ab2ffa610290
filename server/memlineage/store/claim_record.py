"""Record with its claim, as one step: the default of ``LineageStore.record_claim``.

``record_claim`` writes the memory, the supersession of the claim holder the caller
decided it replaces (with its cascade) and one counter event together, or refuses
with ``ClaimMovedError`` when the claim moved on since the caller decided; an
identical retry (same ``record_digest``) is answered from what the store holds
(``RecordOutcome.replayed``).  ``ClaimRecordMixin`` composes it from the store's
primitives; the backends override it with one atomic step of their own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from memlineage.lineage.errors import AlreadyExistsError, LineageError
from memlineage.lineage.model import CascadeResult, MemoryRecord, Status
from memlineage.lineage.validation import StoreLimits, validate_new
from memlineage.store import traversal
from memlineage.store.changes import cascade_reason

__all__ = [
    "ANY_HOLDER",
    "ClaimMovedError",
    "ClaimRecordMixin",
    "RecordOutcome",
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


_DIGEST_TEXT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode
"""`json.dumps` with these options, without building an encoder per call."""


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
    return hashlib.sha256(_DIGEST_TEXT(fields).encode()).hexdigest()[:32]


class ClaimRecordMixin:
    """``LineageStore.record_claim`` and the replay it answers, on the store's own
    primitives (``record``, ``supersede``, ``incr_counter``, ``_load``, ...)."""

    if TYPE_CHECKING:
        limits: StoreLimits
        _snapshot: contextlib.AbstractContextManager[Any]

        def _now(self, now: float | None) -> float: ...

        def record(self, rec: MemoryRecord, *, now: float | None = None) -> MemoryRecord: ...

        def incr_counter(self, namespace: str, name: str, *, now: float | None = None) -> None: ...

        def supersede(
            self,
            namespace: str,
            memory_id: str,
            successor: str,
            *,
            reason: str = "",
            expected_version: int | None = None,
            now: float | None = None,
        ) -> CascadeResult: ...

        def _load(
            self, namespace: str, ids: list[str], with_history: bool = True
        ) -> dict[str, MemoryRecord]: ...

        def _current_claim_id(self, namespace: str, subject: str, attribute: str) -> str | None: ...

        def versions(self, namespace: str, memory_id: str) -> tuple[MemoryRecord, ...]: ...

        def _claim_group(
            self, namespace: str, subject: str, attribute: str
        ) -> list[MemoryRecord]: ...

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
        # the memory as that Record proposed it: its first version when it was revised
        # since (a retry of the Record still is one; the revision's fields are not a
        # Record's, so proposing them is another memory), as Redis keeps the digest
        kept = self.versions(ns, rec.id)
        original = kept[-1] if kept else stored
        if digest not in (record_digest(original), record_digest(original, with_created_at=False)):
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
