"""Lineage model: the record, its status transitions, validation, errors and clock."""

from memlineage.lineage.clock import Clock, ManualClock, system_clock
from memlineage.lineage.errors import (
    AlreadyExistsError,
    CursorExpiredError,
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
    EventType,
    LineageEvent,
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
    "CursorExpiredError",
    "CycleError",
    "EventType",
    "LineageError",
    "LineageEvent",
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
