"""The agent's voice in governance (mixed into `Engine`): an owner objects to the
transition the sweep proposed for its memory. The objection postpones it, is kept
with the memory's proposal (Explain shows it in the memory's history), and counts as
a successful use of the memory (its value's utility and accuracy); a memory gets at
most `max_objections` while its value stays low, so the store cannot be pinned."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from memlineage_dsl.facts import Creator

from memlineage.lineage.errors import (
    NothingLoadedError,
    NotOwnerError,
    ValidationError,
)
from memlineage.lineage.proposals import PENDING, POSTPONED, Objection, Proposal
from memlineage.lineage.validation import check_one_line
from memlineage.scoring.config import ScoringConfig
from memlineage.store.base import LineageStore

MAX_REASON = 512
_TRIES = 8  # saves of an objection tried before the caller is asked to ask again

__all__ = ["Voice"]


class Voice:
    store: LineageStore
    scoring: ScoringConfig

    if TYPE_CHECKING:

        def _now(self, time: float | None) -> float: ...

    def object_to(
        self, ns: str, memory_id: str, actor: Creator, reason: str, time: float | None = None
    ) -> Proposal:
        """Postpone the pending proposal for `memory_id` by `objection_postpone`."""
        now = self._now(time)
        reason = reason.strip()
        if not reason or len(reason) > MAX_REASON:
            raise ValidationError(f"must be 1 to {MAX_REASON} characters", field="reason")
        check_one_line(reason, "reason")  # as a status change's reason
        self.store.get(ns, memory_id)  # NOT_FOUND for an unknown memory
        for _ in range(_TRIES):  # until saved over the proposal it was decided on
            p = self._objectable(ns, memory_id, actor, now)
            postponed = replace(
                p,
                state=POSTPONED,
                deadline=now + self.scoring.objection_postpone,
                objections=(*p.objections, Objection(now, actor.id, reason)),
            )
            # Another owner's objection (or the sweep) may have saved meanwhile: then
            # this one is decided again on what is there now, as if it came second.
            if self.store.save_proposal(postponed, "objected", now=now, replacing=p):
                break
        else:
            raise NothingLoadedError(
                f"the proposal for {memory_id!r} kept changing while this objection was "
                "decided: ask again",
                field="memory_id",
            )
        self.store.feedback(ns, [memory_id], True, now=now)
        self.store.schedule_review(ns, {memory_id: postponed.deadline}, now=now)
        return postponed

    def _objectable(self, ns: str, memory_id: str, actor: Creator, now: float) -> Proposal:
        """The memory's proposal, if `actor` may object to it now."""
        p = self.store.proposal(ns, memory_id)
        if p is None or p.state != PENDING or now >= p.deadline:
            raise NothingLoadedError(
                f"no transition of {memory_id!r} is waiting for its owners", field="memory_id"
            )
        if actor.id not in p.owners:
            raise NotOwnerError(f"{actor.id} is not an owner of {memory_id!r}", field="actor")
        if len(p.objections) >= self.scoring.max_objections:
            raise NothingLoadedError(
                f"{memory_id!r} had its {self.scoring.max_objections} objections: the "
                "transition happens at its deadline",
                field="memory_id",
            )
        return p

    def objections_left(self, p: Proposal) -> int:
        return max(0, self.scoring.max_objections - len(p.objections))
