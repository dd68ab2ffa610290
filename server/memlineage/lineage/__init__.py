"""Lineage model: the record, its status transitions, validation, errors and clock."""

from memlineage.lineage.clock import Clock, ManualClock, system_clock
from memlineage.lineage.errors import (
    AlreadyExistsError,
    CycleError,
    LineageError,
    NamespaceError,
    NotFoundError,
    StoreUnavailableError,
    TransitionError,
    UnknownDependencyError,
    ValidationError,
    VersionConflictError,
)
from memlineage.lineage.model import (
    TRANSITIONS,
    CascadeResult,
    CreatorKind,
    LineageView,
    MemoryRecord,
    MemoryRef,
    Status,
    StatusChange,
    Walk,
)
from memlineage.lineage.validation import StoreLimits

__all__ = [
    "TRANSITIONS",
    "AlreadyExistsError",
    "CascadeResult",
    "Clock",
    "CreatorKind",
    "CycleError",
    "LineageError",
    "LineageView",
    "ManualClock",
    "MemoryRecord",
    "MemoryRef",
    "NamespaceError",
    "NotFoundError",
    "Status",
    "StatusChange",
    "StoreLimits",
    "StoreUnavailableError",
    "TransitionError",
    "UnknownDependencyError",
    "ValidationError",
    "VersionConflictError",
    "Walk",
    "system_clock",
]
