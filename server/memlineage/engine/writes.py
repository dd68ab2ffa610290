"""Record, UpdateStatus and Feedback: the decisions that change the store, each
decided before it is written and logged once it is final."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from memlineage_dsl.decision import ALLOW, DENY, FIRED, Decision, Reason
from memlineage_dsl.facts import DEFAULT_BUDGET, Creator, Request, UnknownMemory

from memlineage.engine.context import EngineBase
from memlineage.engine.decision_log import applied_before
from memlineage.engine.decision_store import record_of
from memlineage.engine.outcomes import (
    RecordResult,
    StatusResult,
)
from memlineage.engine.snapshot import calls_counter, snapshot_of, to_facts
from memlineage.lineage.errors import (
    NotFoundError,
    TransitionError,
    UnknownDependencyError,
    ValidationError,
    VersionConflictError,
)
from memlineage.lineage.model import MemoryRecord, Status
from memlineage.lineage.validation import check_transition, validate_new
from memlineage.store.base import ClaimMovedError, record_digest


class Writes(EngineBase):
    """Record (write/derive, with the claim's supersede in one store step),
    UpdateStatus (update) and Feedback."""

    def record(
        self,
        proposed: MemoryRecord,
        actor: Creator | None = None,
        *,
        budget: float | None = None,
        time: float | None = None,
    ) -> RecordResult:
        """Validate fully, decide, then write. The decision is logged only when it is
        final: a DENY, or a write that the store accepted (never for a refused input)."""
        ns = proposed.namespace
        now = self._now_spending(time)  # it counts `calls()` of its creator for good
        spend = self._budget(budget)
        self._fresh_capture()
        # What the caller proposed, for an identical retry: created_at only if it set it.
        explicit_time = proposed.created_at is not None
        if not explicit_time:
            proposed = replace(proposed, created_at=now)
        proposed = validate_new(proposed, now=now, limits=self.store.limits)
        self._known_volatility(proposed.volatility)
        digest = record_digest(proposed, with_created_at=explicit_time)
        actor = actor or Creator(proposed.creator_kind, proposed.creator_id)
        op = "derive" if proposed.dependencies else "write"
        serving = self.policies.current
        deps = [str(getattr(d, "id", d)) for d in proposed.dependencies]
        # A concurrent Record of the same claim may move its holder between the read and
        # the write: the store then writes nothing (ClaimMovedError) and we decide again.
        for attempt in range(8):
            # The claim's holder first: a write decides on it as `target`, so its lineage
            # is loaded with the rest, to the same bound as the dependencies' (before, it
            # was added alone, and any walk of it failed closed as not loaded).
            current = (
                self.store.current_claim(ns, proposed.subject, proposed.attribute)
                if proposed.subject and proposed.attribute
                else None
            )
            held = [current.id] if current is not None else []
            # One read: the id (must be new), the dependencies and the holder with their
            # lineage.
            ids = list(dict.fromkeys([proposed.id, *deps, *held]))
            records, bound = self._view(ns, ids, op, serving.compiled)
            if proposed.id in records:
                # Recorded already: an identical retry answers the first outcome (nothing
                # is decided or written again); another memory is AlreadyExistsError.
                outcome = self.store.record_claim(proposed, now=now, digest=digest)
                replay = Decision(
                    ALLOW,
                    1.0,
                    0.0,
                    reasons=(
                        Reason(
                            "<replayed>",
                            ALLOW,
                            "an identical Record of this memory was applied already: its outcome",
                            0,
                            FIRED,
                        ),
                    ),
                )
                return RecordResult(
                    True,
                    self._issue(replay, ns, op, (proposed.id,), actor, now, serving.version),
                    outcome.memory,
                    outcome.superseded_id,
                    outcome.affected,
                )
            for i, dep in enumerate(deps):
                if dep not in records:
                    raise UnknownDependencyError(
                        f"no memory {dep!r} in this namespace", field=f"dependencies[{i}]"
                    )
            if current is not None:
                records = {**records, current.id: current}
            mine = to_facts(proposed, now)
            reads = self._reads(serving.compiled, op)
            scores = self._scores(ns, {**records, proposed.id: proposed}, now, reads)
            snap, facts = snapshot_of(
                records, self.store, ns, now, extra=[mine], scores=scores, reads=reads, bound=bound
            )
            target = facts[current.id] if current is not None else mine
            req = Request(op, mine, actor, ns, spend, now, target=target)
            d = self._decide_safely(serving.compiled, req, snap, op)
            if d.effect == DENY:
                return RecordResult(
                    False, self._issue(d, ns, op, (proposed.id,), actor, now, serving.version)
                )
            supersede = (
                current.id
                if current is not None
                and current.value != proposed.value
                and _supersedes(proposed, current)
                else None
            )
            # One atomic store step: the record, its claim-group comparison, the
            # supersession with its cascade, the rate counter (and the write counters).
            try:
                outcome = self.store.record_claim(
                    proposed,
                    now=now,
                    digest=digest,
                    holder=current.id if current is not None else None,
                    supersede=supersede,
                    count=calls_counter(proposed.creator_id),
                )
            except ClaimMovedError:
                if attempt == 7:
                    raise
                continue
            if outcome.memory.claim is not None and not outcome.replayed:
                self.credibility.invalidate_namespace(ns)
            with applied_before(
                f"memory {proposed.id!r} is recorded: the identical Record, once the log is "
                "writable, answers its outcome as a replay"
            ):
                rec = self._issue(d, ns, op, (proposed.id,), actor, now, serving.version)
            return RecordResult(True, rec, outcome.memory, outcome.superseded_id, outcome.affected)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _usable_successor(self, ns: str, memory_id: str, successor: MemoryRecord) -> None:
        """A memory is superseded by one in use, not by a withdrawn one, nor by one built
        on it (the cascade would mark its own successor pending_verification). Read
        before the change, as the other checks here are."""
        if _withdrawn(successor.status):
            raise TransitionError(
                f"successor {successor.id!r} is {successor.status}: a memory is superseded "
                "by one in use",
                current=successor.status,
                requested="superseded",
                field="successor_id",
            )
        walk = self.store.ancestors(ns, successor.id, max_depth=self.store.limits.max_walk_depth)
        if memory_id in walk.depths:
            raise TransitionError(
                f"successor {successor.id!r} rests on {memory_id!r}: superseding it would "
                "mark its own successor pending_verification",
                current=successor.status,
                requested="superseded",
                field="successor_id",
            )

    def update_status(
        self,
        ns: str,
        memory_id: str,
        action: str,
        actor: Creator,
        *,
        successor: str | None = None,
        reason: str = "",
        expected_version: int | None = None,
        time: float | None = None,
    ) -> StatusResult:
        """Check existence, version and transition first, then decide, then apply; the
        decision is logged once it is final (a DENY, or the change applied)."""
        self._fresh_capture()
        target = {
            "revoke": Status.REVOKED,
            "supersede": Status.SUPERSEDED,
            "confirm": Status.ACTIVE,
            "compress": Status.COMPRESSED,
        }.get(action)
        if target is None:
            raise ValidationError(f"unknown status action {action!r}", field="action")
        if action in ("supersede", "compress") and not successor:
            raise ValidationError(f"is required to {action}", field="successor_id")
        found = self.store.get_many(ns, [memory_id, *([successor] if successor else [])])
        current = found.get(memory_id)
        if current is None:
            raise NotFoundError(f"memory {memory_id!r} not found", field="memory_id")
        if successor and successor not in found:
            raise NotFoundError(f"memory {successor!r} not found", field="successor_id")
        if action == "compress" and memory_id not in _dependency_ids(found[successor or ""]):
            raise ValidationError(
                f"summary {successor!r} must depend on {memory_id!r}", field="successor_id"
            )
        if action == "supersede" and successor:
            self._usable_successor(ns, memory_id, found[successor])
        if expected_version is not None and current.version != expected_version:
            raise VersionConflictError(
                f"memory {memory_id!r} is at version {current.version}, not {expected_version}",
                field="expected_version",
                expected=expected_version,
                actual=current.version,
            )
        if action == "confirm" and current.status != Status.PENDING_VERIFICATION:
            raise TransitionError(
                f"memory {memory_id!r} is {current.status}, only "
                "pending_verification can be confirmed",
                current=current.status,
                requested="active",
            )
        check_transition(current.status, target, memory_id)
        now = self._now(time)
        serving = self.policies.current
        records, bound = self._view(ns, [memory_id], "update", serving.compiled, loaded=found)
        reads = self._reads(serving.compiled, "update")
        snap, facts = snapshot_of(
            records,
            self.store,
            ns,
            now,
            scores=self._scores(ns, records, now, reads),
            reads=reads,
            bound=bound,
        )
        memory = facts.get(memory_id) or UnknownMemory(memory_id, ns)
        d = self._decide_safely(
            serving.compiled,
            Request("update", memory, actor, ns, DEFAULT_BUDGET, now),
            snap,
            "update",
        )
        if d.effect == DENY:
            return StatusResult(
                False, self._issue(d, ns, "update", (memory_id,), actor, now, serving.version)
            )
        if action == "confirm":
            stored = self.store.confirm(
                ns,
                memory_id,
                reason=reason or "confirmed",
                expected_version=expected_version,
                now=now,
            )
            with applied_before(f"memory {memory_id!r} is confirmed (version {stored.version})"):
                rec = self._issue(d, ns, "update", (memory_id,), actor, now, serving.version)
            return StatusResult(True, rec, stored)
        if action == "compress":
            result = self.store.set_status(
                ns,
                memory_id,
                Status.COMPRESSED,
                reason=reason or f"compressed into {successor}",
                expected_version=expected_version,
                now=now,
            )
        elif action == "revoke":
            result = self.store.revoke(
                ns, memory_id, reason=reason, expected_version=expected_version, now=now
            )
        else:
            result = self.store.supersede(
                ns,
                memory_id,
                successor or "",
                reason=reason,
                expected_version=expected_version,
                now=now,
            )
        past = {"compress": "compressed", "revoke": "revoked"}.get(action, "superseded")
        done = f"memory {memory_id!r} is {past} (version {result.root.version})"
        with applied_before(done):
            rec = self._issue(d, ns, "update", (memory_id,), actor, now, serving.version)
        return StatusResult(True, rec, result.root, tuple(result.affected))

    def feedback(
        self,
        ns: str,
        decision_id: str,
        memory_ids: Sequence[str],
        success: bool,
        *,
        time: float | None = None,
    ) -> int:
        """A use that succeeded or failed: moves the memories' accuracy (uses_ok /
        uses_failed) and their sources' credibility."""
        now = self._now(time)
        ids = list(dict.fromkeys(memory_ids))
        # (only this namespace's journal: another's is answered as one never issued)
        known = self.journal.get(ns, decision_id) if decision_id else None
        if known is None and decision_id and not ids:
            # Another sidecar's, or one from before a restart: the store's copy (found
            # only in the caller's namespace; with memory ids given, none is needed).
            self._flush_decisions_quietly()
            kept = self.store.kept_decision(ns, decision_id)
            known = record_of(kept) if kept is not None else None
            if known is None:
                raise NotFoundError(
                    f"no decision {decision_id!r} in this namespace, and no memory_ids "
                    "to report on",
                    field="decision_id",
                )
        if known is not None:
            ids = ids or list(known.memory_ids)
        if not ids:
            raise ValidationError("names no memory", field="memory_ids")
        records = self.store.get_many(ns, ids)
        updated = self.store.feedback(ns, list(records), success, now=now) if records else 0
        self.credibility.invalidate(ns, {r.creator_id for r in records.values()})
        return updated


def _withdrawn(status: str) -> bool:
    return status in (Status.REVOKED, Status.SUPERSEDED, Status.COMPRESSED)


def _supersedes(new: MemoryRecord, current: MemoryRecord) -> bool:
    """A new value of a claim replaces the current one when it comes from the same
    source, or from the user (users are authoritative about what they said); a
    different value from another source is a contradiction, not a replacement."""
    return new.creator_id == current.creator_id or new.creator_kind == "user"


def _dependency_ids(rec: MemoryRecord) -> set[str]:
    return {str(getattr(d, "id", d)) for d in rec.dependencies}
