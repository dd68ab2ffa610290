"""Versions of a memory: ``revise`` (a new version under the same id, lineage
included) and ``versions`` (the earlier ones), the store contract's defaults.

A revision replaces what a memory says and what it rests on: type, tags, the claim's
value, volatility, creator, confidence, created_at, context and the dependencies.
The claim's subject and attribute stay (another claim is another memory: Record it).
It is one atomic step on every backend: the compare-and-set on ``version``, the
dependency checks with the cycle check, the previous version kept (``versions``), the
derivation links moved, the new status (pending_verification on a tainted dependency,
else active), the ``updated`` event and the cascade that marks every descendant
pending_verification (one ``cascaded`` event), or nothing at all.

``RevisionsMixin`` validates once for every backend and calls ``_revise``;
``find_cycle`` is the walk both backends use to name the cycle a revision would make.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from memlineage.lineage.errors import (
    CycleError,
    TransitionError,
    ValidationError,
    VersionConflictError,
)
from memlineage.lineage.model import CLAIM_PEERS, MemoryRecord, Status
from memlineage.lineage.validation import StoreLimits, check_limit, validate_new
from memlineage.store.traversal import Load

__all__ = [
    "REVISABLE",
    "REVISED_FIELDS",
    "RevisionOutcome",
    "RevisionsMixin",
    "check_revisable",
    "cycle_error",
    "find_cycle",
    "revision_reason",
]

REVISABLE = CLAIM_PEERS
"""Statuses a memory can be revised from (active, pending_verification): a revoked,
superseded, archived, compressed or evicted memory is history, not revised."""


@dataclass(frozen=True, slots=True)
class RevisionOutcome:
    """What one revision did: the memory as stored now, the version it replaced (kept,
    see ``versions``) and the descendants marked pending_verification."""

    memory: MemoryRecord
    previous_version: int
    affected: tuple[str, ...] = ()


def revision_reason(version: int) -> str:
    """The history reason a revision writes on the descendants it re-marks (and the
    ``updated`` event's reason): which version of their ancestor they were built on."""
    return f"ancestor revised: version {version} replaced"


def check_revisable(stored: MemoryRecord, proposed: MemoryRecord, expected_version: int) -> None:
    """Refusals that depend on the stored version: the compare-and-set, the status,
    the claim's subject and attribute. Shared by the backends (under their lock or
    on the version their script compares) and the engine (before it decides)."""
    if stored.version != expected_version:
        raise VersionConflictError(
            f"memory {stored.id!r} is at version {stored.version}, not {expected_version}",
            expected=expected_version,
            actual=stored.version,
            field="expected_version",
        )
    if stored.status not in REVISABLE:
        raise TransitionError(
            f"memory {stored.id!r} is {stored.status}: only active or "
            "pending_verification memories are revised",
            current=stored.status,
            requested="revised",
        )
    if (stored.subject, stored.attribute) != (proposed.subject, proposed.attribute):
        if stored.subject is not None:
            problem = (
                f"a revision keeps its claim's subject and attribute ({stored.subject}, "
                f"{stored.attribute}); record another memory for another claim"
            )
        else:
            problem = (
                "the memory was recorded with no claim, and a revision cannot add one; "
                "record another memory for the claim"
            )
        raise ValidationError(
            problem,
            field="subject",
            code="CLAIM_CHANGED",
        )


def find_cycle(
    load: Load, namespace: str, memory_id: str, deps: Iterable[str]
) -> tuple[int, tuple[str, ...]] | None:
    """The cycle ``memory_id`` would close by depending on ``deps``: (index of the
    dependency, the path ``memory_id -> dep -> ... -> memory_id`` along dependencies),
    or None. Breadth first from the dependencies, one ``load`` per level, so the path
    named is a shortest one."""
    wanted = list(deps)
    parent: dict[str, str | None] = {}
    origin: dict[str, int] = {}
    frontier: list[str] = []
    for i, dep in enumerate(wanted):
        if dep not in parent:
            parent[dep], origin[dep] = None, i
            frontier.append(dep)
    while frontier:
        if memory_id in parent:
            break
        found = load(namespace, frontier, False)
        nxt: list[str] = []
        for node in frontier:
            rec = found.get(node)
            for up in cast("tuple[str, ...]", rec.dependencies if rec is not None else ()):
                if up not in parent:
                    parent[up], origin[up] = node, origin[node]
                    nxt.append(up)
        frontier = nxt
    if memory_id not in parent:
        return None
    path = [memory_id]
    back = parent[memory_id]
    while back is not None:
        path.append(back)
        back = parent[back]
    path.append(memory_id)
    # path is memory_id <- ... <- dep <- memory_id read backwards: reverse the middle
    return origin[memory_id], (memory_id, *reversed(path[1:-1]), memory_id)


def cycle_error(index: int, path: tuple[str, ...]) -> CycleError:
    """The refusal of a revision that would close ``path`` through ``dependencies[index]``."""
    return CycleError(f"would make a cycle {' -> '.join(path)}", field=f"dependencies[{index}]")


class RevisionsMixin:
    """``revise`` and ``versions`` of ``LineageStore``, over the backend's ``_revise``
    and ``_versions``."""

    if TYPE_CHECKING:
        limits: StoreLimits

        def _now(self, now: float | None) -> float: ...

        def _ns(self, namespace: str) -> str: ...

        def _id(self, memory_id: str, field: str = "id") -> str: ...

        def _revise(
            self, rec: MemoryRecord, expected_version: int, now: float
        ) -> RevisionOutcome: ...

        def _versions(self, namespace: str, memory_id: str) -> list[MemoryRecord]: ...

        _snapshot: contextlib.AbstractContextManager[Any]

        def _ids(self, ids: Iterable[str]) -> list[str]: ...

        def _load(
            self, namespace: str, ids: list[str], with_history: bool = True
        ) -> dict[str, MemoryRecord]: ...

    def revise(
        self, rec: MemoryRecord, *, expected_version: int, now: float | None = None
    ) -> RevisionOutcome:
        """Record a new version of the existing memory ``rec.id`` (see the module's
        docstring) if it is still at ``expected_version``: VersionConflictError
        otherwise, CycleError naming the cycle when a dependency is the memory's own
        descendant, UnknownDependencyError, TransitionError for a memory that is not
        active or pending_verification; any refusal writes nothing. ``rec.created_at``
        unset: the new version is created ``now``. The new version is
        ``expected_version + 1``."""
        at = self._now(now)
        if isinstance(expected_version, bool) or not isinstance(expected_version, int):
            raise ValidationError(
                "must be the version revised", field="expected_version", code="INVALID_LIMIT"
            )
        check_limit(expected_version, "expected_version", 2**62)
        if expected_version < 1:
            raise ValidationError(
                "must be the version revised (1 or more)",
                field="expected_version",
                code="INVALID_LIMIT",
            )
        checked = validate_new(rec, now=at, limits=self.limits)
        if checked.status != Status.ACTIVE.value:
            raise ValidationError(
                "is worked out by the store for a revision",
                field="status",
                code="READ_ONLY_FIELD",
            )
        return self._revise(checked, expected_version, at)

    def cycle_of(
        self, namespace: str, memory_id: str, dependencies: Iterable[str]
    ) -> tuple[int, tuple[str, ...]] | None:
        """The cycle ``memory_id`` would close by depending on ``dependencies`` (see
        ``find_cycle``), for a caller that refuses before it decides; ``revise``
        checks again in its atomic step."""
        ns = self._ns(namespace)
        memory_id = self._id(memory_id)
        deps = self._ids(dependencies)
        with self._snapshot:
            return find_cycle(self._load, ns, memory_id, deps)

    def versions(self, namespace: str, memory_id: str) -> tuple[MemoryRecord, ...]:
        """The earlier versions of a memory, newest first, each as it was when it was
        replaced (its own ``version``, dependencies, creator...; no status history,
        no derivations): the memory is a revision of ``versions[0]``, which is one of
        ``versions[1]``... Empty for a memory never revised (or unknown)."""
        found = self._versions(self._ns(namespace), self._id(memory_id))
        return tuple(reversed(found))


REVISED_FIELDS = (
    "type",
    "tags",
    "value",
    "volatility",
    "creator_kind",
    "creator_id",
    "creator_confidence",
    "created_at",
    "context_id",
    "dependencies",
)
"""What a revision replaces (the claim's subject and attribute stay; the store keeps
the rest: status worked out again, version + 1, access and use statistics kept)."""
