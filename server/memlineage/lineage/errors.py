"""Domain errors of the lineage store.

Every error carries a machine ``code`` (stable, for clients and tests), the
offending ``field`` when one input is to blame (``dependencies[2]``), and the
gRPC status name the service layer should map it to, so that mapping is a
lookup rather than a chain of ``isinstance`` checks.
"""

from __future__ import annotations

from pathlib import Path


class LineageError(Exception):
    """Base class: a precise, machine-readable refusal."""

    code: str = "LINEAGE_ERROR"
    grpc_status: str = "INTERNAL"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        where = f"{self.field}: " if self.field else ""
        return f"{where}{self.message} [{self.code}]"


class ValidationError(LineageError):
    """The input is malformed or violates a limit; nothing was written."""

    code = "INVALID"
    grpc_status = "INVALID_ARGUMENT"


class UnknownDependencyError(ValidationError):
    """A dependency does not exist in the record's namespace."""

    code = "UNKNOWN_DEPENDENCY"


class CycleError(ValidationError):
    """The change would make the lineage graph cyclic (including self-dependency)."""

    code = "CYCLE"


class NamespaceError(LineageError):
    """The request reaches into another namespace; refused without revealing it."""

    code = "CROSS_NAMESPACE"
    grpc_status = "PERMISSION_DENIED"


class NotFoundError(LineageError):
    """The memory addressed by the request does not exist in its namespace."""

    code = "NOT_FOUND"
    grpc_status = "NOT_FOUND"


class AlreadyExistsError(LineageError):
    """A memory with this id already exists in the namespace (records are immutable)."""

    code = "ALREADY_EXISTS"
    grpc_status = "ALREADY_EXISTS"


class GrantLimitError(LineageError):
    """A grant refused because its namespace holds its cap of grants and too few of them
    are inert (spent, expired, not yet valid, or not a user's) to make room: nothing is
    dropped or written. A caller's limit, so RESOURCE_EXHAUSTED, with what to do."""

    code = "GRANT_LIMIT"
    grpc_status = "RESOURCE_EXHAUSTED"

    def __init__(self, namespace: str, cap: int):
        super().__init__(
            f"namespace {namespace!r} holds {cap} grants, the most it may, and too few of "
            "them are spent or expired to make room; nothing was recorded: let grants "
            "expire or spend their uses, then record the grant again"
        )
        self.namespace = namespace
        self.cap = cap


class VersionConflictError(LineageError):
    """Compare-and-set refused: the caller's version is stale."""

    code = "VERSION_CONFLICT"
    grpc_status = "FAILED_PRECONDITION"

    def __init__(self, message: str, *, expected: int, actual: int, field: str = "version"):
        super().__init__(message, field=field)
        self.expected = expected
        self.actual = actual


class TransitionError(LineageError):
    """The status change is not in the transition table for the current status."""

    code = "INVALID_TRANSITION"
    grpc_status = "FAILED_PRECONDITION"

    def __init__(self, message: str, *, current: str, requested: str, field: str = "status"):
        super().__init__(message, field=field)
        self.current = current
        self.requested = requested


class NotOwnerError(LineageError):
    """The caller does not own the memory it speaks for (an objection)."""

    code = "NOT_OWNER"
    grpc_status = "PERMISSION_DENIED"


class NothingLoadedError(LineageError):
    """An action on something that is not there (promote with no shadow candidate)."""

    code = "NOTHING_LOADED"
    grpc_status = "FAILED_PRECONDITION"


class CursorExpiredError(LineageError):
    """The event cursor is older than the oldest retained event (or ahead of the log,
    after a reset): events were lost for this reader, who must re-sync."""

    code = "CURSOR_EXPIRED"
    grpc_status = "OUT_OF_RANGE"

    def __init__(self, message: str, *, field: str = "cursor"):
        super().__init__(message, field=field)


class StoreUnavailableError(LineageError):
    """The backing store cannot be reached; the caller decides fail-closed/degraded."""

    code = "STORE_UNAVAILABLE"
    grpc_status = "UNAVAILABLE"


EMBEDDED_REMEDY = (
    "nothing on disk was changed (restore the file from a backup, or move it away with its "
    "-wal and -shm files to start empty)"
)
"""The end of a ``StoreCorruptError`` for a file of the embedded store."""


TOO_DEEP = "nested deeper than the parser goes"
"""Why a stored or logged JSON text that raised RecursionError is not read (said in
errors of the stores and of `log verify`)."""


class StoreCorruptError(LineageError):
    """What a store holds cannot be read back as it was written (nothing is changed):
    the embedded store refuses to open; on Redis the read that met the value is
    refused (DATA_LOSS) and the others go on. ``path``: the file or the key;
    ``problem``: what is wrong there, on one line."""

    code = "STORE_CORRUPT"
    grpc_status = "DATA_LOSS"

    def __init__(
        self,
        path: str | Path,
        problem: str,
        *,
        store: str = "embedded store",
        remedy: str = EMBEDDED_REMEDY,
    ) -> None:
        self.path = str(path)
        self.problem = " ".join(problem.split())  # one line, whatever the cause said
        super().__init__(f"{store} {self.path} cannot be read: {self.problem}; {remedy}")
