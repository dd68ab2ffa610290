"""Revise: a new version of an existing memory, authorised as an `update` in the
same call and written in one atomic store step (`LineageStore.revise`).

The policies see `memory` = the proposed version (its new dependencies, creator,
confidence, tags, claim value; the version number and status it will have) and
`target` = the version stored now, so `on update` rules (write protection) judge who
changes what. Everything the input alone can refuse (unknown memory or dependency,
stale version, status, claim, a cycle) is refused before deciding, so a decision is
logged only when it is final: a DENY (nothing written) or the revision applied."""

from __future__ import annotations

from dataclasses import dataclass, replace

from memlineage_dsl.decision import DENY
from memlineage_dsl.facts import Creator, Request

from memlineage.engine.context import EngineBase
from memlineage.engine.decision_log import applied_before
from memlineage.engine.records import DecisionRecord
from memlineage.engine.snapshot import snapshot_of, to_facts
from memlineage.lineage.errors import NotFoundError, UnknownDependencyError, ValidationError
from memlineage.lineage.model import TAINTED, MemoryRecord, Status
from memlineage.lineage.validation import validate_new
from memlineage.store.revisions import check_revisable, cycle_error

__all__ = ["ReviseResult", "Revisions"]


@dataclass(frozen=True, slots=True)
class ReviseResult:
    """What a Revise answers: whether it was applied (False: the policies denied it,
    nothing written), the update decision, the memory as stored when applied, the
    version it replaced and the descendants marked pending_verification."""

    applied: bool
    decision: DecisionRecord
    memory: MemoryRecord | None = None
    previous_version: int = 0
    affected_ids: tuple[str, ...] = ()


class Revisions(EngineBase):
    """`revise`: validate, decide `update`, write the new version."""

    def revise(
        self,
        proposed: MemoryRecord,
        expected_version: int,
        actor: Creator | None = None,
        *,
        budget: float | None = None,
        time: float | None = None,
    ) -> ReviseResult:
        """Record a new version of `proposed.id` over `expected_version` (required:
        the compare-and-set), if the policies allow the update. `actor` unset: the new
        version's creator, who makes the change."""
        self._fresh_capture()
        ns = proposed.namespace
        now = self._now(time)
        spend = self._budget(budget)
        if isinstance(expected_version, bool) or expected_version < 1:
            raise ValidationError(
                "is required: the version this revision replaces", field="expected_version"
            )
        if proposed.created_at is None:
            proposed = replace(proposed, created_at=now)
        proposed = validate_new(proposed, now=now, limits=self.store.limits)
        self._known_volatility(proposed.volatility)
        actor = actor or Creator(proposed.creator_kind, proposed.creator_id)
        serving = self.policies.current
        deps = [str(d) for d in proposed.dependencies]
        records, bound = self._view(ns, [proposed.id, *deps], "update", serving.compiled)
        stored = records.get(proposed.id)
        if stored is None:
            raise NotFoundError(f"no memory {proposed.id!r} in this namespace", field="id")
        for i, dep in enumerate(deps):
            if dep not in records:
                raise UnknownDependencyError(
                    f"no memory {dep!r} in this namespace", field=f"dependencies[{i}]"
                )
        check_revisable(stored, proposed, expected_version)
        added = [d for d in deps if d not in stored.dependencies]
        cycle = self.store.cycle_of(ns, proposed.id, added)
        if cycle is not None:
            raise cycle_error(deps.index(added[cycle[0]]), cycle[1])
        # The version as it will be stored (the store works the same out again).
        tainted = any(records[d].status in TAINTED for d in deps)
        same = (proposed.value, proposed.creator_id) == (stored.value, stored.creator_id)
        new = replace(
            proposed,
            version=expected_version + 1,
            status=Status.PENDING_VERIFICATION.value if tainted else Status.ACTIVE.value,
            access_count=stored.access_count,
            last_access=stored.last_access,
            uses_ok=stored.uses_ok,
            uses_failed=stored.uses_failed,
            confirmed_by=stored.confirmed_by if same else (),
            contradicted_by=stored.contradicted_by if same else (),
        )
        reads = self._reads(serving.compiled, "update")
        before = self._scores(ns, records, now, reads)
        target = snapshot_of(records, self.store, ns, now, scores=before, reads=reads)[1][stored.id]
        after = self._scores(ns, {**records, new.id: new}, now, reads)
        mine = to_facts(new, now)
        snap, _ = snapshot_of(
            records, self.store, ns, now, extra=[mine], scores=after, reads=reads, bound=bound
        )
        req = Request("update", mine, actor, ns, spend, now, target=target)
        d = self._decide_safely(serving.compiled, req, snap, "update")
        if d.effect == DENY:
            rec = self._issue(d, ns, "update", (proposed.id,), actor, now, serving.version)
            return ReviseResult(False, rec, previous_version=stored.version)
        outcome = self.store.revise(proposed, expected_version=expected_version, now=now)
        self.credibility.invalidate_namespace(ns)
        with applied_before(
            f"memory {proposed.id!r} is revised (version {outcome.memory.version})"
        ):
            rec = self._issue(d, ns, "update", (proposed.id,), actor, now, serving.version)
        return ReviseResult(
            True, rec, outcome.memory, outcome.previous_version, tuple(outcome.affected)
        )
