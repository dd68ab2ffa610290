"""What a failed call raises: one `MemLineageError` subclass per gRPC status the
sidecar uses (UNKNOWN, which it never sends, stays the base class), and
`PolicyDenied` for an operation the policies refused."""

from __future__ import annotations

import grpc
import grpc.aio

from memlineage.v1 import memlineage_pb2 as pb

__all__ = [
    "Aborted",
    "AlreadyExists",
    "Cancelled",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "MemLineageError",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "PolicyDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "closed_in_flight",
    "error_from_rpc",
    "never_ready",
    "revised_concurrently",
    "rpc_status",
]


ERROR_CODE_KEY = "memlineage-error-code"
ERROR_FIELD_KEY = "memlineage-error-field"
"""The trailing metadata a sidecar sends with a refusal (its stable error code and the
request field to blame); the same keys as the servicer's, which this package cannot
import (a test pins them together)."""


class MemLineageError(Exception):
    """A failed call, with the gRPC status code and the server's details; `reason` is
    the sidecar's stable error code when it sent one (``VERSION_CONFLICT``,
    ``INVALID_TRANSITION``, ``CYCLE``, ``UNKNOWN_DEPENDENCY``, ``STORE_UNAVAILABLE``,
    ...: one status code covers several), `field` the request field it blames
    (``memory.dependencies[2]``); both "" when the call never reached a sidecar."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self, code: grpc.StatusCode, details: str, *, reason: str = "", field: str = ""
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.reason = reason
        self.field = field


class InvalidArgument(MemLineageError, ValueError):
    """Malformed input; ``details`` is "field: message". Also a ValueError: the
    sidecar found an argument's value wrong (an unknown or self dependency, say),
    which the adapters' callers catch as they catch the adapters' own checks."""


class NotFound(MemLineageError):
    """An unknown memory."""


class PermissionDenied(MemLineageError):
    """A namespace the caller may not use, or an admin RPC without admin rights."""


class Unauthenticated(MemLineageError):
    """A missing or unknown token."""


class FailedPrecondition(MemLineageError):
    """A version conflict or a forbidden status transition."""


class Unavailable(MemLineageError):
    """The sidecar (or its store) cannot answer; retries were exhausted or unsafe."""


class OutOfRange(MemLineageError):
    """A watch cursor that is no longer retained."""


class DeadlineExceeded(MemLineageError):
    """The call did not finish within the client's timeout."""


class AlreadyExists(MemLineageError):
    """A Record of a different memory under an id its namespace holds (an identical
    retry answers the first outcome instead), or a grant id the namespace holds."""


class ResourceExhausted(MemLineageError):
    """A bound was reached: a namespace full of live grants, a request too large."""


class Aborted(MemLineageError):
    """Concurrent Records of one claim kept moving it: asking again may succeed."""


class DataLoss(MemLineageError):
    """A value the sidecar's store holds is damaged; ``details`` names where (nothing
    was changed). Not retried: it stays damaged until an operator repairs it."""


class Cancelled(MemLineageError):
    """The call was cancelled before its answer: its client was closed with it in
    flight. Whether a write was applied is not known (as for `Unavailable`)."""


class Internal(MemLineageError):
    """A bug in the sidecar, not the caller's error: its log has the traceback. Not
    retried."""


class Unimplemented(MemLineageError):
    """A method the sidecar does not serve: one older than this client."""


_ERRORS: dict[grpc.StatusCode, type[MemLineageError]] = {
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.DATA_LOSS: DataLoss,
}


def rpc_status(exc: grpc.RpcError) -> tuple[grpc.StatusCode, str]:
    """The status code and details of a failed call (UNKNOWN when it carries none).

    A blocking call's error is a `grpc.Call`; a `grpc.aio` call's is an
    `AioRpcError`, which is not, so both are read here.
    """
    if isinstance(exc, grpc.Call | grpc.aio.AioRpcError):
        details: str = exc.details() or ""
        return exc.code(), details
    return grpc.StatusCode.UNKNOWN, str(exc)


def error_from_rpc(exc: grpc.RpcError, unreachable: str | None = None) -> MemLineageError:
    """The `MemLineageError` subclass for a grpc.RpcError (the base class if none fits).
    `unreachable`: the target of a channel that never became ready, named in a
    DEADLINE_EXCEEDED (a call that waited for a sidecar that is not there, not a slow
    answer)."""
    code, details = rpc_status(exc)
    if unreachable is not None and code == grpc.StatusCode.DEADLINE_EXCEEDED:
        details = (
            f"{details} (the sidecar at {unreachable} was never reachable within the deadline: "
            "is it running, and is that its address?)"
        )
    reason, field = _trailers(exc)
    return _ERRORS.get(code, MemLineageError)(code, details, reason=reason, field=field)


def closed_in_flight() -> MemLineageError:
    """What a call raises when its client is closed while it is in flight: the sync
    client's error (gRPC's CANCELLED "Channel closed!"), for the async client too,
    whose grpc.aio call raises CancelledError instead."""
    return Cancelled(grpc.StatusCode.CANCELLED, "Channel closed!")


def _trailers(exc: grpc.RpcError) -> tuple[str, str]:
    """The sidecar's error code and field from a failed call's trailing metadata."""
    reason = field = ""
    if isinstance(exc, grpc.Call | grpc.aio.AioRpcError):
        for key, value in exc.trailing_metadata() or ():
            if key == ERROR_CODE_KEY and isinstance(value, str):
                reason = value
            elif key == ERROR_FIELD_KEY and isinstance(value, str):
                field = value
    return reason, field


def stale_version(answer: object) -> bool:
    """Whether `answer` (a Revise's error, or any reply) is the refusal of a new version
    over one that is no longer current: another writer revised it first, so a wrapper
    reads the version again and retries."""
    return isinstance(answer, FailedPrecondition) and answer.details.startswith("expected_version")


def revised_concurrently(memory_id: str, attempts: int) -> FailedPrecondition:
    """What a wrapper raises when its new version of `memory_id` met a newer one
    `attempts` times running (each time it read the version again)."""
    return FailedPrecondition(
        grpc.StatusCode.FAILED_PRECONDITION,
        f"{memory_id!r}: revised concurrently {attempts} times; write it again",
        reason="VERSION_CONFLICT",
    )


def never_ready(channel: grpc.Channel) -> bool:
    """Whether `channel` is not connected now (asked on a failed call only). The
    future is cancelled whatever its answer: one left waiting keeps its channel
    subscribed, a grpc thread polling the channel until the process ends (and
    printing a traceback when it meets the interpreter's exit)."""
    ready = grpc.channel_ready_future(channel)
    try:
        ready.result(timeout=0.05)
    except grpc.FutureTimeoutError:
        return True
    finally:
        ready.cancel()
    return False


class PolicyDenied(Exception):
    """The policies denied an operation; ``decision`` says which and why."""

    def __init__(self, decision: pb.Decision) -> None:
        why = "; ".join(
            f"{r.policy}: {r.message}" if r.message else r.policy
            for r in decision.reasons
            if r.effect == pb.EFFECT_DENY
        )
        op = pb.Operation.Name(decision.operation).removeprefix("OPERATION_").lower()
        ids = ", ".join(decision.memory_ids)
        super().__init__(f"{op} {ids} denied" + (f": {why}" if why else ""))
        self.decision = decision
