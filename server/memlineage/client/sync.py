"""`MemLineageClient`, the blocking client, and `WatchStream`, its event stream.

A thin typed layer over the generated stubs: Python values in, pb messages out,
one deadline per call, the bearer token on every call, and retries only where a
retry cannot apply a change twice (see `should_retry`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memlineage.client.convert import (
    ActArg,
    act_arguments,
    parse_actor,
    parse_creator,
    parse_operation,
    to_timestamp,
)
from memlineage.client.errors import error_from_rpc, rpc_status
from memlineage.client.retry import backoff_delay, should_retry
from memlineage.client.stubs import Unary, WatchCall, new_stubs
from memlineage.v1 import memlineage_pb2 as pb

__all__ = ["MemLineageClient", "WatchStream"]

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")


class MemLineageClient:
    """A connection to one MemLineage sidecar.

    ``timeout`` bounds each call including its retries; ``retries`` is how many
    times a call is re-sent after the first attempt (see `should_retry`).
    ``sleep`` and ``rng`` are injectable so tests never sleep.
    """

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        namespace: str = "",
        timeout: float = 5.0,
        retries: int = 3,
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
        self._stub, self._admin = new_stubs(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    # -- lifecycle
    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> MemLineageClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing
    def _call(self, method: Unary[_Req, _Resp], request: _Req, *, idempotent: bool) -> _Resp:
        """One unary call under one deadline, retried per `should_retry`."""
        deadline = time.monotonic() + self.timeout
        attempt = 0
        while True:
            remaining = max(deadline - time.monotonic(), 0.001)
            try:
                return method(request, timeout=remaining, metadata=self._metadata)
            except grpc.RpcError as exc:
                code, details = rpc_status(exc)
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
        self,
        memory_id: str,
        *,
        creator: str,
        confidence: float = 1.0,
        type: str = "fact",
        tags: Sequence[str] = (),
        claim: tuple[str, str, str] | None = None,
        volatility: str = "",
        context_id: str = "",
        dependencies: Sequence[str] = (),
        created_at: float | None = None,
        actor: str | None = None,
        budget: float | None = None,
        at: float | None = None,
    ) -> pb.RecordResponse:
        """Record a memory's lineage; ``recorded`` is False when the policies deny it."""
        memory = pb.Memory(
            id=memory_id,
            type=type,
            tags=list(tags),
            volatility=volatility,
            creator=parse_creator(creator),
            creator_confidence=confidence,
            context_id=context_id,
            dependencies=list(dependencies),
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
        self,
        operation: str,
        memory_id: str | Sequence[str],
        *,
        actor: str | None = None,
        budget: float | None = None,
        action: str = "",
        historical: bool = False,
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
        self,
        candidates: Sequence[tuple[str, float]],
        *,
        actor: str | None = None,
        budget: float | None = None,
        historical: bool = False,
        limit: int = 0,
        at: float | None = None,
    ) -> pb.FilterRankResponse:
        """Filter retrieval candidates ``(id, similarity)`` and re-rank the kept ones."""
        request = pb.FilterRankRequest(
            namespace=self.namespace,
            historical=historical,
            limit=limit,
            candidates=[pb.Candidate(memory_id=i, similarity=s) for i, s in candidates],
        )
        self._decision_context(request, actor=actor, budget=budget, at=at)
        return self._call(self._stub.FilterRank, request, idempotent=True)

    def _update_status(
        self,
        memory_id: str,
        action: pb.StatusAction,
        *,
        successor_id: str = "",
        reason: str,
        expected_version: int,
        actor: str | None,
        at: float | None,
    ) -> pb.UpdateStatusResponse:
        request = pb.UpdateStatusRequest(
            namespace=self.namespace,
            memory_id=memory_id,
            action=action,
            successor_id=successor_id,
            reason=reason,
            expected_version=expected_version,
        )
        self._decision_context(request, actor=actor, budget=None, at=at)
        return self._call(self._stub.UpdateStatus, request, idempotent=False)

    def revoke(
        self,
        memory_id: str,
        reason: str = "",
        expected_version: int = 0,
        actor: str | None = None,
        at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """Revoke a memory; its descendants become pending_verification."""
        return self._update_status(
            memory_id,
            pb.STATUS_ACTION_REVOKE,
            reason=reason,
            expected_version=expected_version,
            actor=actor,
            at=at,
        )

    def supersede(
        self,
        memory_id: str,
        successor_id: str,
        reason: str = "",
        expected_version: int = 0,
        actor: str | None = None,
        at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """Mark a memory superseded by ``successor_id``; cascades like revoke."""
        return self._update_status(
            memory_id,
            pb.STATUS_ACTION_SUPERSEDE,
            successor_id=successor_id,
            reason=reason,
            expected_version=expected_version,
            actor=actor,
            at=at,
        )

    def confirm(
        self,
        memory_id: str,
        reason: str = "",
        expected_version: int = 0,
        actor: str | None = None,
        at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """Re-validate a pending_verification memory."""
        return self._update_status(
            memory_id,
            pb.STATUS_ACTION_CONFIRM,
            reason=reason,
            expected_version=expected_version,
            actor=actor,
            at=at,
        )

    def act(
        self,
        action: str,
        args: Mapping[str, Sequence[str] | ActArg] | None = None,
        *,
        relies_on: Sequence[str] = (),
        actor: str | None = None,
        budget: float | None = None,
        at: float | None = None,
    ) -> pb.Decision:
        """Ask before taking `action`: each argument bound to the memories its value came
        from (``{"recipient": ["mem-1"]}``, or ``ActArg(sources, value, digest)``; an
        empty list: the agent chose it), plus other memories it `relies_on`. An allowed
        act spends one use of each user grant it needed (``Decision.grants_used``), so
        it is never re-sent."""
        request = pb.CheckRequest(
            namespace=self.namespace,
            operation=pb.OPERATION_ACT,
            action=action,
            memory_ids=list(relies_on),
            arguments=act_arguments(args),
        )
        self._decision_context(request, actor=actor, budget=budget, at=at)
        return self._call(self._stub.Check, request, idempotent=False).decision

    def grant(
        self,
        actions: Sequence[str],
        *,
        source: str = "",
        memory_id: str = "",
        arguments: Sequence[str] = (),
        uses: int = 1,
        expires_at: float | None = None,
        value: str = "",
        digest: str = "",
        grant_id: str = "",
        actor: str | None = None,
        at: float | None = None,
    ) -> pb.Grant:
        """Record the user's delegation: `source` (a creator id or glob) or the one memory
        `memory_id` may fill `arguments` (all when empty) of `actions` (names or globs),
        `uses` times, until `expires_at` (unset: one hour); with `value` (or `digest`)
        only an argument with exactly that value (digest) is covered. `actor` is the issuer (unset:
        the namespace's user); a grant issued by anyone but a user has no effect."""
        grant = pb.Grant(
            id=grant_id,
            actions=list(actions),
            arguments=list(arguments),
            source=source,
            memory_id=memory_id,
            uses=uses,
            value=value,
            digest=digest,
        )
        if expires_at is not None:
            grant.expires_at.CopyFrom(to_timestamp(expires_at))
        request = pb.GrantRequest(namespace=self.namespace, grant=grant)
        self._decision_context(request, actor=actor, budget=None, at=at)
        return self._call(self._stub.RecordGrant, request, idempotent=False).grant

    def feedback(
        self,
        decision_id: str,
        memory_ids: Sequence[str],
        success: bool,
        note: str = "",
        at: float | None = None,
    ) -> pb.FeedbackResponse:
        """Report whether what a decision allowed worked out (moves credibility/accuracy)."""
        request = pb.FeedbackRequest(
            namespace=self.namespace,
            decision_id=decision_id,
            memory_ids=list(memory_ids),
            success=success,
            note=note,
        )
        if at is not None:
            request.time.CopyFrom(to_timestamp(at))
        return self._call(self._stub.Feedback, request, idempotent=False)

    def explain(
        self,
        memory_id: str,
        ancestor_depth: int = 0,
        descendant_depth: int = 0,
        decisions: int = 0,
    ) -> pb.ExplainResponse:
        """A memory's lineage graph and recent decisions (0: the server's defaults)."""
        request = pb.ExplainRequest(
            namespace=self.namespace,
            memory_id=memory_id,
            ancestor_depth=ancestor_depth,
            descendant_depth=descendant_depth,
            decisions=decisions,
        )
        return self._call(self._stub.Explain, request, idempotent=True)

    def watch(self, cursor: str = "", from_oldest: bool = False) -> WatchStream:
        """Stream lineage events; iterate it, ``cancel()`` it from any thread.

        No deadline applies (a watch is long-lived). On UNAVAILABLE it reconnects
        after the last event's cursor, up to ``retries`` times in a row.
        """

        def open_call(after: str) -> WatchCall:
            request = pb.WatchRequest(
                namespace=self.namespace, cursor=after, from_oldest=from_oldest and not after
            )
            return self._stub.Watch(request, metadata=self._metadata)

        return WatchStream(
            open_call, cursor, retries=self.retries, sleep=self._sleep, rng=self._rng
        )

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

    def run_sweep(
        self, namespace: str = "", batch: int = 0, at: float | None = None
    ) -> pb.RunSweepResponse:
        """One lifecycle governance pass (admin): archive / evict by value."""
        request = pb.RunSweepRequest(namespace=namespace, batch=batch)
        if at is not None:
            request.time.CopyFrom(to_timestamp(at))
        return self._call(self._admin.RunSweep, request, idempotent=False)

    def compress(
        self,
        memory_id: str,
        summary_id: str,
        reason: str = "",
        expected_version: int = 0,
        actor: str | None = None,
        at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """Mark a memory compressed into a summary memory that depends on it."""
        return self._update_status(
            memory_id,
            pb.STATUS_ACTION_COMPRESS,
            successor_id=summary_id,
            reason=reason,
            expected_version=expected_version,
            actor=actor,
            at=at,
        )

    # -- grpc.health.v1
    def health(self, service: str = "") -> str:
        """The serving status name, e.g. "SERVING" or "NOT_SERVING"."""
        response = self._call(
            self._health.Check, health_pb2.HealthCheckRequest(service=service), idempotent=True
        )
        name: str = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return name


class WatchStream(Iterator[pb.LineageEvent]):
    """The events of a Watch; ``cancel()`` ends the iteration cleanly from any thread."""

    def __init__(
        self,
        open_call: Callable[[str], WatchCall],
        cursor: str,
        *,
        retries: int,
        sleep: Callable[[float], None],
        rng: Callable[[], float],
    ) -> None:
        self._open = open_call
        self.cursor = cursor  # the last event seen: where a reconnect resumes
        self._retries = retries
        self._sleep = sleep
        self._rng = rng
        self._lock = threading.Lock()
        self._call: WatchCall | None = None
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
                code, details = rpc_status(exc)
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

    def _forget(self, call: WatchCall) -> None:
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
