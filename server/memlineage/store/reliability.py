"""Reliability bookkeeping and the review schedule of the store contract.

``ReliabilityMixin``: claim groups, source statistics and usage feedback;
``ReviewScheduleMixin``: the schedule of the tiered governance sweep.  Both
validate the arguments once for every backend, then call the backend's primitive
(``_claim_group``, ``_source_stats``, ``_feedback``, ``_due_for_review``,
``_schedule_review``, ``_unschedule_review``).  None of it bumps versions or
emits events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from memlineage.lineage.errors import ValidationError
from memlineage.lineage.model import MemoryRecord
from memlineage.lineage.validation import StoreLimits, check_id, check_limit, check_time
from memlineage.store.arguments import MAX_BATCH_IDS, check_sources

__all__ = ["ReliabilityMixin", "ReviewScheduleMixin"]


class ReliabilityMixin:
    """The claim-group, source-statistics and feedback methods of ``LineageStore``."""

    if TYPE_CHECKING:
        limits: StoreLimits

        def _now(self, now: float | None) -> float: ...

        def _ns(self, namespace: str) -> str: ...

        def _ids(self, ids: Iterable[str]) -> list[str]: ...

        def _claim_group(
            self, namespace: str, subject: str, attribute: str
        ) -> list[MemoryRecord]: ...

        def _source_stats(
            self, namespace: str, sources: list[str]
        ) -> dict[str, tuple[float, float]]: ...

        def _feedback(self, namespace: str, ids: list[str], success: bool, now: float) -> int: ...

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


class ReviewScheduleMixin:
    """The review-schedule methods of ``LineageStore`` (the tiered governance sweep)."""

    if TYPE_CHECKING:

        def _now(self, now: float | None) -> float: ...

        def _ns(self, namespace: str) -> str: ...

        def _ids(self, ids: Iterable[str]) -> list[str]: ...

        def _due_for_review(self, namespace: str, now: float, limit: int) -> list[str]: ...

        def _schedule_review(self, namespace: str, times: dict[str, float], now: float) -> int: ...

        def _unschedule_review(self, namespace: str, ids: list[str]) -> int: ...

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
