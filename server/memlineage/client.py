"""Python client for the MemLineage sidecar, and a guard for existing memory stores.

`MemLineageClient` is a thin typed layer over the generated stubs: Python values
in, pb messages out, one deadline per call, the bearer token on every call, and
retries only where a retry cannot apply a change twice (see `should_retry`).

`GuardedStore` puts the sidecar's checks in front of any store with
``put/get/search/delete`` so the agent code that calls the store stays as it is.
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc

__all__ = [
    "DeadlineExceeded",
    "DictMemoryStore",
    "FailedPrecondition",
    "GuardedStore",
    "InvalidArgument",
    "MemLineageClient",
    "MemLineageError",
    "MemoryStore",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "PolicyDenied",
    "Unauthenticated",
    "Unavailable",
    "WatchStream",
    "backoff_delay",
    "error_from_rpc",
    "from_timestamp",
    "parse_actor",
    "parse_creator",
    "parse_operation",
    "should_retry",
    "to_timestamp",
]

# ---------------------------------------------------------------- errors


class MemLineageError(Exception):
    """A failed call, with the gRPC status code and the server's details."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


class InvalidArgument(MemLineageError):
    """Malformed input; ``details`` is "field: message"."""


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


_ERRORS: dict[grpc.StatusCode, type[MemLineageError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}


def _status(exc: grpc.RpcError) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, grpc.Call):
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.UNKNOWN, str(exc)


def error_from_rpc(exc: grpc.RpcError) -> MemLineageError:
    """The `MemLineageError` subclass for a grpc.RpcError (the base class if none fits)."""
    code, details = _status(exc)
    return _ERRORS.get(code, MemLineageError)(code, details)


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


# ---------------------------------------------------------------- conversions

_KINDS: dict[str, pb.CreatorKind.ValueType] = {
    "user": pb.CREATOR_KIND_USER,
    "tool": pb.CREATOR_KIND_TOOL,
    "reasoning": pb.CREATOR_KIND_REASONING,
    "agent": pb.CREATOR_KIND_AGENT,
    "system": pb.CREATOR_KIND_SYSTEM,
}

_OPERATIONS: dict[str, pb.Operation.ValueType] = {
    "read": pb.OPERATION_READ,
    "write": pb.OPERATION_WRITE,
    "update": pb.OPERATION_UPDATE,
    "delete": pb.OPERATION_DELETE,
    "derive": pb.OPERATION_DERIVE,
    "act": pb.OPERATION_ACT,
}


def _kind_of(text: str, what: str) -> pb.CreatorKind.ValueType:
    kind = text.split(":", 1)[0]
    if kind not in _KINDS or not text.strip():
        raise ValueError(
            f"{what}: {text!r} is not \"kind:id\" with kind one of {', '.join(_KINDS)}"
        )
    return _KINDS[kind]


def parse_actor(text: str) -> pb.Actor:
    """``"tool:flight_api"`` -> Actor(kind=TOOL, id="tool:flight_api").

    The id keeps its kind prefix, as the policy language's ``Creator.parse`` does,
    so a policy comparing ``actor.id == "tool:flight_api"`` sees the same text.
    """
    return pb.Actor(kind=_kind_of(text, "actor"), id=text)


def parse_creator(text: str) -> pb.Creator:
    """``"user:alice"`` -> Creator(kind=USER, id="user:alice"); see `parse_actor`."""
    return pb.Creator(kind=_kind_of(text, "creator"), id=text)


def parse_operation(name: str) -> pb.Operation.ValueType:
    """``"read"`` … ``"act"`` -> the pb enum; anything else is a ValueError."""
    try:
        return _OPERATIONS[name]
    except KeyError:
        raise ValueError(
            f"operation: {name!r} is not one of {', '.join(_OPERATIONS)}"
        ) from None


def to_timestamp(t: float) -> Timestamp:
    """Epoch seconds -> Timestamp, keeping the fraction as nanoseconds."""
    if not math.isfinite(t):
        raise ValueError(f"time: {t!r} is not a finite number of seconds")
    seconds = math.floor(t)
    nanos = round((t - seconds) * 1e9)
    if nanos >= 1_000_000_000:
        seconds, nanos = seconds + 1, nanos - 1_000_000_000
    return Timestamp(seconds=seconds, nanos=nanos)


def from_timestamp(ts: Timestamp) -> float:
    """Timestamp -> epoch seconds (an unset Timestamp is 0.0)."""
    return ts.seconds + ts.nanos / 1e9


# ---------------------------------------------------------------- retry rule

_NOT_SENT = re.compile(
    r"failed to connect|connection refused|connect failed|dns resolution failed"
    r"|name resolution|no route to host|network is unreachable",
    re.IGNORECASE,
)


def should_retry(code: grpc.StatusCode, details: str, *, idempotent: bool) -> bool:
    """Whether a failed attempt may be sent again.

    Only UNAVAILABLE is retried. A read-only call (Check, FilterRank, Explain,
    Watch, ListPolicies, LintPolicy, health) may always be retried. A call that
    changes state (Record, UpdateStatus, Feedback, ReloadPolicies) is retried
    only when the details show the channel never reached a server (connection
    refused, name resolution): once a server has the request, a second send
    could apply it twice (Feedback would count twice), so that error surfaces.
    """
    if code != grpc.StatusCode.UNAVAILABLE:
        return False
    return idempotent or bool(_NOT_SENT.search(details))


def backoff_delay(
    attempt: int, *, base: float = 0.05, cap: float = 1.0,
    rng: Callable[[], float] = random.random,
) -> float:
    """Sleep before retry number ``attempt`` (0-based): base·2^attempt capped, half jittered.

    The delay lies in [c/2, c] with c = min(cap, base·2^attempt), so clients that
    failed together do not come back together, yet never retry immediately.
    """
    ceiling = min(cap, base * 2 ** attempt)
    return ceiling * (0.5 + 0.5 * rng())


# ---------------------------------------------------------------- client

_Resp = TypeVar("_Resp")


class MemLineageClient:
    """A connection to one MemLineage sidecar.

    ``timeout`` bounds each call including its retries; ``retries`` is how many
    times a call is re-sent after the first attempt (see `should_retry`).
    ``sleep`` and ``rng`` are injectable so tests never sleep.
    """

    def __init__(
        self, target: str, *, token: str | None = None, namespace: str = "",
        timeout: float = 5.0, retries: int = 3,
        credentials: grpc.ChannelCredentials | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout: {timeout!r} must be positive")
        if retries < 0:
            raise ValueError(f"retries: {retries!r} must be 0 or more")
        self.target = target
        self.namespace = namespace
        self.timeout = timeout
        self.retries = retries
        self._sleep = sleep
        self._rng = rng
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._channel = (
            grpc.secure_channel(target, credentials, options=list(options))
            if credentials is not None
            else grpc.insecure_channel(target, options=list(options))
        )
        self._stub = pb_grpc.MemLineageStub(self._channel)
        self._admin = pb_grpc.PolicyAdminStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    # -- lifecycle
    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> MemLineageClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing
    def _call(
        self, method: Callable[..., _Resp], request: Any, *, idempotent: bool
    ) -> _Resp:
        """One unary call under one deadline, retried per `should_retry`."""
        deadline = time.monotonic() + self.timeout
        attempt = 0
        while True:
            remaining = max(deadline - time.monotonic(), 0.001)
            try:
                return method(request, timeout=remaining, metadata=self._metadata)
            except grpc.RpcError as exc:
                code, details = _status(exc)
                if attempt >= self.retries or not should_retry(
                    code, details, idempotent=idempotent
                ):
                    raise error_from_rpc(exc) from None
                delay = backoff_delay(attempt, rng=self._rng)
                if time.monotonic() + delay >= deadline:
                    raise error_from_rpc(exc) from None
                self._sleep(delay)
                attempt += 1

    @staticmethod
    def _decision_context(
        request: Any, *, actor: str | None, budget: float | None, at: float | None
    ) -> None:
        if actor is not None:
            request.actor.CopyFrom(parse_actor(actor))
        if budget is not None:
            request.budget = budget
        if at is not None:
            request.time.CopyFrom(to_timestamp(at))

    # -- MemLineage
    def record(
        self, memory_id: str, *, creator: str, confidence: float = 1.0, type: str = "fact",
        tags: Sequence[str] = (), claim: tuple[str, str, str] | None = None,
        volatility: str = "", context_id: str = "", dependencies: Sequence[str] = (),
        created_at: float | None = None, actor: str | None = None,
        budget: float | None = None, at: float | None = None,
    ) -> pb.RecordResponse:
        """Record a memory's lineage; ``recorded`` is False when the policies deny it."""
        memory = pb.Memory(
            id=memory_id, type=type, tags=list(tags), volatility=volatility,
            creator=parse_creator(creator), creator_confidence=confidence,
            context_id=context_id, dependencies=list(dependencies),
        )
        if claim is not None:
            subject, attribute, value = claim
            memory.claim.CopyFrom(pb.Claim(subject=subject, attribute=attribute, value=value))
        if created_at is not None:
            memory.created_at.CopyFrom(to_timestamp(created_at))
        request = pb.RecordRequest(namespace=self.namespace, memory=memory)
        self._decision_context(request, actor=actor, budget=budget, at=at)
        return self._call(self._stub.Record, request, idempotent=False)

    def check(
        self, operation: str, memory_id: str | Sequence[str], *, actor: str | None = None,
        budget: float | None = None, action: str = "", historical: bool = False,
        at: float | None = None,
    ) -> pb.Decision:
        """Ask for one operation's decision (the CheckResponse holds nothing else).

        ``act`` takes every memory the action relies on; the other operations one id.
        """
        op = parse_operation(operation)
        ids = [memory_id] if isinstance(memory_id, str) else list(memory_id)
        request = pb.CheckRequest(
            namespace=self.namespace, operation=op, action=action, historical=historical
        )
        if op == pb.OPERATION_ACT:
            request.memory_ids.extend(ids)
        elif len(ids) == 1:
            request.memory_id = ids[0]
        else:
            raise ValueError(f"memory_id: {operation} takes one id, got {len(ids)}")
        self._decision_context(request, actor=actor, budget=budget, at=at)
        return self._call(self._stub.Check, request, idempotent=True).decision

    def filter_rank(
        self, candidates: Sequence[tuple[str, float]], *, actor: str | None = None,
        budget: float | None = None, historical: bool = False, limit: int = 0,
        at: float | None = None,
    ) -> pb.FilterRankResponse:
        """Filter retrieval candidates ``(id, similarity)`` and re-rank the kept ones."""
        request = pb.FilterRankRequest(
            namespace=self.namespace, historical=historical, limit=limit,
            candidates=[pb.Candidate(memory_id=i, similarity=s) for i, s in candidates],
        )
        self._decision_context(request, actor=actor, budget=budget, at=at)
        return self._call(self._stub.FilterRank, request, idempotent=True)

    def _update_status(
        self, memory_id: str, action: pb.StatusAction.ValueType, *, successor_id: str = "",
        reason: str, expected_version: int, actor: str | None, at: float | None,
    ) -> pb.UpdateStatusResponse:
        request = pb.UpdateStatusRequest(
            namespace=self.namespace, memory_id=memory_id, action=action,
            successor_id=successor_id, reason=reason, expected_version=expected_version,
        )
        self._decision_context(request, actor=actor, budget=None, at=at)
        return self._call(self._stub.UpdateStatus, request, idempotent=False)

    def revoke(
        self, memory_id: str, reason: str = "", expected_version: int = 0,
        actor: str | None = None, at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """Revoke a memory; its descendants become pending_verification."""
        return self._update_status(
            memory_id, pb.STATUS_ACTION_REVOKE, reason=reason,
            expected_version=expected_version, actor=actor, at=at,
        )

    def supersede(
        self, memory_id: str, successor_id: str, reason: str = "", expected_version: int = 0,
        actor: str | None = None, at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """Mark a memory superseded by ``successor_id``; cascades like revoke."""
        return self._update_status(
            memory_id, pb.STATUS_ACTION_SUPERSEDE, successor_id=successor_id, reason=reason,
            expected_version=expected_version, actor=actor, at=at,
        )

    def confirm(
        self, memory_id: str, reason: str = "", expected_version: int = 0,
        actor: str | None = None, at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """Re-validate a pending_verification memory."""
        return self._update_status(
            memory_id, pb.STATUS_ACTION_CONFIRM, reason=reason,
            expected_version=expected_version, actor=actor, at=at,
        )

    def feedback(
        self, decision_id: str, memory_ids: Sequence[str], success: bool, note: str = "",
        at: float | None = None,
    ) -> pb.FeedbackResponse:
        """Report whether what a decision allowed worked out (moves credibility/accuracy)."""
        request = pb.FeedbackRequest(
            namespace=self.namespace, decision_id=decision_id, memory_ids=list(memory_ids),
            success=success, note=note,
        )
        if at is not None:
            request.time.CopyFrom(to_timestamp(at))
        return self._call(self._stub.Feedback, request, idempotent=False)

    def explain(
        self, memory_id: str, ancestor_depth: int = 0, descendant_depth: int = 0,
        decisions: int = 0,
    ) -> pb.ExplainResponse:
        """A memory's lineage graph and recent decisions (0: the server's defaults)."""
        request = pb.ExplainRequest(
            namespace=self.namespace, memory_id=memory_id, ancestor_depth=ancestor_depth,
            descendant_depth=descendant_depth, decisions=decisions,
        )
        return self._call(self._stub.Explain, request, idempotent=True)

    def watch(self, cursor: str = "", from_oldest: bool = False) -> WatchStream:
        """Stream lineage events; iterate it, ``cancel()`` it from any thread.

        No deadline applies (a watch is long-lived). On UNAVAILABLE it reconnects
        after the last event's cursor, up to ``retries`` times in a row.
        """

        def open_call(after: str) -> Any:
            request = pb.WatchRequest(
                namespace=self.namespace, cursor=after, from_oldest=from_oldest and not after
            )
            return self._stub.Watch(request, metadata=self._metadata)

        return WatchStream(open_call, cursor, retries=self.retries, sleep=self._sleep,
                           rng=self._rng)

    # -- PolicyAdmin
    def list_policies(self) -> pb.ListPoliciesResponse:
        return self._call(self._admin.ListPolicies, pb.ListPoliciesRequest(), idempotent=True)

    def reload_policies(self, files: Mapping[str, str] | None = None) -> pb.ReloadPoliciesResponse:
        """Reload the configured directory (``files`` None) or swap in the given set."""
        request = pb.ReloadPoliciesRequest(files=dict(files or {}))
        return self._call(self._admin.ReloadPolicies, request, idempotent=False)

    def lint_policy(self, files: Mapping[str, str]) -> pb.LintPolicyResponse:
        request = pb.LintPolicyRequest(files=dict(files))
        return self._call(self._admin.LintPolicy, request, idempotent=True)

    def run_sweep(self, namespace: str = "", batch: int = 0,
                  at: float | None = None) -> pb.RunSweepResponse:
        """One lifecycle governance pass (admin): archive / evict by value."""
        request = pb.RunSweepRequest(namespace=namespace, batch=batch)
        if at is not None:
            request.time.CopyFrom(to_timestamp(at))
        return self._call(self._admin.RunSweep, request, idempotent=False)

    def compress(
        self, memory_id: str, summary_id: str, reason: str = "", expected_version: int = 0,
        actor: str | None = None, at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """Mark a memory compressed into a summary memory that depends on it."""
        return self._update_status(
            memory_id, pb.STATUS_ACTION_COMPRESS, successor_id=summary_id, reason=reason,
            expected_version=expected_version, actor=actor, at=at,
        )

    # -- grpc.health.v1
    def health(self, service: str = "") -> str:
        """The serving status name, e.g. "SERVING" or "NOT_SERVING"."""
        response = self._call(
            self._health.Check, health_pb2.HealthCheckRequest(service=service), idempotent=True
        )
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


class WatchStream(Iterator[pb.LineageEvent]):
    """The events of a Watch; ``cancel()`` ends the iteration cleanly from any thread."""

    def __init__(
        self, open_call: Callable[[str], Any], cursor: str, *, retries: int,
        sleep: Callable[[float], None], rng: Callable[[], float],
    ) -> None:
        self._open = open_call
        self.cursor = cursor  # the last event seen: where a reconnect resumes
        self._retries = retries
        self._sleep = sleep
        self._rng = rng
        self._lock = threading.Lock()
        self._call: Any = None
        self._cancelled = False

    def __iter__(self) -> WatchStream:
        return self

    def __next__(self) -> pb.LineageEvent:
        failures = 0
        while True:
            with self._lock:
                if self._cancelled:
                    raise StopIteration
                if self._call is None:
                    self._call = self._open(self.cursor)
                call = self._call
            try:
                event: pb.LineageEvent = next(call)
            except StopIteration:
                self._forget(call)
                raise
            except grpc.RpcError as exc:
                self._forget(call)
                code, details = _status(exc)
                if self._cancelled:
                    raise StopIteration from None
                if failures >= self._retries or not should_retry(code, details, idempotent=True):
                    raise error_from_rpc(exc) from None
                self._sleep(backoff_delay(failures, rng=self._rng))
                failures += 1
                continue
            if event.cursor:
                self.cursor = event.cursor
            return event

    def _forget(self, call: Any) -> None:
        with self._lock:
            if self._call is call:
                self._call = None

    def cancel(self) -> None:
        """Stop the stream; a blocked ``next()`` returns StopIteration."""
        with self._lock:
            self._cancelled = True
            call = self._call
        if call is not None:
            call.cancel()

    close = cancel

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


# ---------------------------------------------------------------- guarded store


class MemoryStore(Protocol):
    """What `GuardedStore` needs from the store it wraps."""

    def put(self, key: str, value: Any, **meta: Any) -> Any: ...
    def get(self, key: str) -> Any: ...
    def search(self, query: str, k: int) -> list[tuple[str, Any, float]]: ...
    def delete(self, key: str) -> Any: ...


_RECORD_META = ("creator", "confidence", "type", "tags", "claim", "dependencies",
                "volatility", "context_id", "created_at")


class GuardedStore:
    """A memory store with MemLineage's checks in front; callers keep calling it as before.

    Lineage is recorded before content is written, so the store never holds a
    memory the sidecar has no provenance for. A denied operation raises
    `PolicyDenied` and leaves the wrapped store untouched. The decision behind the
    latest get/put/delete is in ``last_decision`` (DEGRADE obligations live there).
    Other attributes pass through to the wrapped store.
    """

    def __init__(
        self, store: MemoryStore, client: MemLineageClient, *, creator: str | None = None,
        actor: str | None = None, overfetch: int = 3, historical: bool = False,
    ) -> None:
        if overfetch < 1:
            raise ValueError(f"overfetch: {overfetch!r} must be at least 1")
        self.store = store
        self.client = client
        self.creator = creator  # used when a put names no creator
        self.actor = actor  # who asks; None: the sidecar's default
        self.overfetch = overfetch
        self.historical = historical
        self.last_decision: pb.Decision | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "store":  # not yet set: avoid recursing into ourselves
            raise AttributeError(name)
        return getattr(self.store, name)

    def _exists(self, key: str) -> bool:
        if hasattr(type(self.store), "__contains__"):
            return key in self.store  # type: ignore[operator]
        try:
            return self.store.get(key) is not None
        except LookupError:
            return False

    def _allow(self, decision: pb.Decision) -> pb.Decision:
        self.last_decision = decision
        if decision.effect == pb.EFFECT_DENY:
            raise PolicyDenied(decision)
        return decision

    def put(self, key: str, value: Any, **meta: Any) -> Any:
        """Record (new key) or check update (existing key), then write through.

        ``meta`` reaches the wrapped store unchanged; its lineage keys (creator,
        confidence, type, tags, claim, dependencies, volatility, context_id,
        created_at) also go into the record.
        """
        if self._exists(key):
            self._allow(self.client.check("update", key, actor=self.actor))
            return self.store.put(key, value, **meta)
        lineage = {k: meta[k] for k in _RECORD_META if k in meta}
        creator = lineage.pop("creator", None) or self.creator
        if creator is None:
            raise ValueError("creator: pass creator= to put() or to GuardedStore()")
        if "claim" in lineage and lineage["claim"] is not None:
            lineage["claim"] = tuple(lineage["claim"])
        response = self.client.record(key, creator=creator, actor=self.actor, **lineage)
        self.last_decision = response.decision
        if not response.recorded:
            raise PolicyDenied(response.decision)
        return self.store.put(key, value, **meta)

    def get(self, key: str) -> Any:
        """The value if the read is allowed or degraded (see ``last_decision``)."""
        self._allow(self.client.check(
            "read", key, actor=self.actor, historical=self.historical
        ))
        return self.store.get(key)

    def search(self, query: str, k: int) -> list[tuple[str, Any, float, pb.Decision]]:
        """At most ``k`` ``(key, value, rank_score, decision)``, allowed ones only, best first.

        The wrapped store is asked for ``overfetch·k`` candidates so that denied
        ones do not leave the answer short.
        """
        if k <= 0:
            return []
        found = self.store.search(query, k * self.overfetch)
        values: dict[str, Any] = {}
        candidates: list[tuple[str, float]] = []
        for key, value, similarity in found:
            if key not in values:
                values[key] = value
                candidates.append((key, float(similarity)))
        if not candidates:
            return []
        response = self.client.filter_rank(
            candidates, actor=self.actor, historical=self.historical, limit=k
        )
        ranked = {c.memory_id: c for c in response.candidates if c.kept}
        out = []
        for memory_id in response.ranked_ids:
            c = ranked.get(memory_id)
            if c is not None and memory_id in values:
                out.append((memory_id, values[memory_id], c.rank_score, c.decision))
        return out[:k]

    def delete(self, key: str) -> Any:
        """Delete if the policies allow; the lineage record stays for audit."""
        self._allow(self.client.check("delete", key, actor=self.actor))
        return self.store.delete(key)


_TOKEN = re.compile(r"\w+")


def _tokens(text: Any) -> set[str]:
    return set(_TOKEN.findall(str(text).lower()))


class DictMemoryStore:
    """A tiny in-memory store (naive token-overlap search) for examples and tests."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[Any, dict[str, Any]]] = {}

    def put(self, key: str, value: Any, **meta: Any) -> None:
        self.items[key] = (value, meta)

    def get(self, key: str) -> Any:
        """The value; KeyError when absent."""
        return self.items[key][0]

    def search(self, query: str, k: int) -> list[tuple[str, Any, float]]:
        """The ``k`` best ``(key, value, jaccard similarity)`` with some overlap."""
        q = _tokens(query)
        scored = []
        for key, (value, _) in self.items.items():
            v = _tokens(value)
            union = q | v
            similarity = len(q & v) / len(union) if union else 0.0
            if similarity > 0:
                scored.append((key, value, similarity))
        scored.sort(key=lambda t: (-t[2], t[0]))
        return scored[:k]

    def delete(self, key: str) -> None:
        self.items.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self.items

    def __len__(self) -> int:
        return len(self.items)
