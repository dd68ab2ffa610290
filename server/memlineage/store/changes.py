"""Lineage changes of the store contract: status changes (with their cascade) and
compare-and-set edits (``update``, ``add_dependencies``).

``LineageChangesMixin`` validates the arguments once for every backend, then calls
the backend's atomic primitive (``_change_status``, ``_update``,
``_add_dependencies``).  ``cascade_reason`` is the history reason a cascade writes
on the descendants it re-marks; the backends write it, the Record replay reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from memlineage.lineage.errors import TransitionError, ValidationError
from memlineage.lineage.model import CascadeResult, MemoryRecord, Status
from memlineage.lineage.validation import (
    StoreLimits,
    check_dependencies,
    check_limit,
    check_reason,
    check_status,
    validate_changes,
)

__all__ = ["LineageChangesMixin", "cascade_reason"]


def cascade_reason(target: Status, reason: str) -> str:
    """The history reason written on descendants re-marked by a cascade."""
    return f"ancestor {target.value}: {reason}" if reason else f"ancestor {target.value}"


def live_derivations(
    memory_id: str, current: str, target: Status, live: list[str]
) -> TransitionError:
    """The refusal of an ``idle_only`` change (``evict``): the live derivations named."""
    named = ", ".join(live[:3]) + (f" and {len(live) - 3} more" if len(live) > 3 else "")
    return TransitionError(
        f"memory {memory_id!r} has live derivations ({named}): not {target.value}",
        current=current,
        requested=target.value,
    )


class LineageChangesMixin:
    """The status-change and compare-and-set methods of ``LineageStore``."""

    if TYPE_CHECKING:
        limits: StoreLimits

        def _now(self, now: float | None) -> float: ...

        def _ns(self, namespace: str) -> str: ...

        def _id(self, memory_id: str, field: str = "id") -> str: ...

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
        ) -> CascadeResult: ...

        def _update(
            self,
            namespace: str,
            memory_id: str,
            expected_version: int,
            changes: dict[str, Any],
            now: float,
        ) -> MemoryRecord: ...

        def _add_dependencies(
            self,
            namespace: str,
            memory_id: str,
            deps: tuple[str, ...],
            expected_version: int,
            now: float,
        ) -> MemoryRecord: ...

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

    def evict(
        self,
        namespace: str,
        memory_id: str,
        *,
        reason: str = "",
        now: float | None = None,
    ) -> CascadeResult:
        """Evict a memory unless a derivation of it is live (active or
        pending_verification): TransitionError naming them. The check is part of the
        change's atomic step: the sweep read no live derivation, but an agent may record
        a child in between, and an evicted memory under a live child broke the sweep's
        own rule."""
        ns = self._ns(namespace)
        memory_id = self._id(memory_id)
        reason = check_reason(reason, self.limits)
        return self._change_status(
            ns,
            memory_id,
            Status.EVICTED,
            reason=reason,
            successor=None,
            expected_version=None,
            now=self._now(now),
            only_from=None,
            idle_only=True,
        )

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
