"""`MemLineageClient`, the blocking client, and `WatchStream`, its event stream.

A thin typed layer over the generated stubs: Python values in, pb messages out,
one deadline per call, the bearer token on every call. Retries are gRPC's own
(`memlineage.client.retry`): read-only calls are re-sent on UNAVAILABLE by the
channel's retry policy, calls that change state never are, and every call waits
for the channel to come up (``wait_for_ready``) within its deadline.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, Unpack

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memlineage.client import messages
from memlineage.client.convert import ActArg
from memlineage.client.errors import error_from_rpc, never_ready, rpc_status
from memlineage.client.messages import CheckOptions, GrantFields, MemoryFields, RankOptions
from memlineage.client.retry import backoff_delay, channel_options
from memlineage.client.stubs import Unary, WatchCall, new_stubs
from memlineage.client.targets import check_target
from memlineage.v1 import memlineage_pb2 as pb

__all__ = ["MemLineageClient", "WatchStream", "require_sync_client"]

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")


def _open_channel(
    target: str,
    credentials: grpc.ChannelCredentials | None,
    options: list[tuple[str, Any]],
) -> grpc.Channel:
    if credentials is not None:
        return grpc.secure_channel(target, credentials, options=options)
    return grpc.insecure_channel(target, options=options)


class MemLineageClient:
    """A connection to one MemLineage sidecar.

    ``timeout`` bounds each call including its retries. ``retries`` is how many
    times gRPC re-sends a read-only call the sidecar answered UNAVAILABLE (at most
    4, gRPC's cap); a call that changes state is never re-sent
    (`memlineage.client.retry`). ``wait_for_ready`` (None: when ``retries`` > 0)
    makes a call wait for an unreachable sidecar until its deadline instead of
    failing at once with UNAVAILABLE. ``sleep`` and ``rng`` pace a Watch's
    reconnects (injectable so tests never sleep); ``options`` are extra channel
    arguments, which win over the client's own.
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
        wait_for_ready: bool | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout: {timeout!r} must be positive")
        if retries < 0:
            raise ValueError(f"retries: {retries!r} must be 0 or more")
        check_target(target)
        self.target = target
        self.namespace = namespace
        self.timeout = timeout
        self.retries = retries
        self.wait_for_ready = retries > 0 if wait_for_ready is None else wait_for_ready
        self._sleep = sleep
        self._rng = rng
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        # Two channels, one connection (gRPC shares the subchannel): the retrying one
        # for read-only calls, the once one for calls that must not be sent twice.
        self._channel = _open_channel(target, credentials, channel_options(retries, options))
        self._once_channel = _open_channel(target, credentials, channel_options(0, options))
        self._stub, self._admin = new_stubs(self._channel)
        self._once, self._once_admin = new_stubs(self._once_channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._closed = False

    # -- lifecycle
    def close(self) -> None:
        """Close the channels; calls in flight raise `MemLineageError` CANCELLED, later
        ones RuntimeError, as the async client's (not grpc's ValueError, which a caller
        catching `InvalidArgument` as a ValueError would take for a refused argument)."""
        self._closed = True
        self._channel.close()
        self._once_channel.close()

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise RuntimeError("MemLineageClient: the client is closed")

    def __enter__(self) -> MemLineageClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing
    def _call(self, method: Unary[_Req, _Resp], request: _Req) -> _Resp:
        """One unary call under one deadline; gRPC retries it if its channel may."""
        self._refuse_if_closed()
        try:
            return method(
                request,
                timeout=self.timeout,
                metadata=self._metadata,
                wait_for_ready=self.wait_for_ready,
            )
        except grpc.RpcError as exc:
            gone = exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and never_ready(self._channel)
            raise error_from_rpc(exc, self.target if gone else None) from None

    # -- MemLineage
    def record(self, memory_id: str, **fields: Unpack[MemoryFields]) -> pb.RecordResponse:
        """Record a memory's lineage (the fields: ``messages.MemoryFields``; ``creator``
        required); ``recorded`` is False when the policies deny it. Never re-sent."""
        return self._call(self._once.Record, messages.record(self.namespace, memory_id, **fields))

    def revise(
        self, memory_id: str, *, expected_version: int, **fields: Unpack[MemoryFields]
    ) -> pb.ReviseResponse:
        """Record a new version of an existing memory (its dependencies, creator,
        confidence, tags, claim value...: ``messages.MemoryFields``) over
        ``expected_version``, decided as an update: ``applied`` is False when the
        policies deny it (nothing written). A stale version is FailedPrecondition, a
        dependency on its own descendant InvalidArgument naming the cycle. Never re-sent."""
        request = messages.revise(self.namespace, memory_id, expected_version, **fields)
        return self._call(self._once.Revise, request)

    def check(
        self, operation: str, memory_id: str | Sequence[str], **options: Unpack[CheckOptions]
    ) -> pb.Decision:
        """Ask for one operation's decision (the CheckResponse holds nothing else;
        the keywords: ``messages.CheckOptions``).

        ``act`` takes every memory the action relies on; the other operations one id.
        A check of ``act`` is the act gate's decision, as `act`, so it is never re-sent.
        """
        request = messages.check(self.namespace, operation, memory_id, **options)
        stub = self._once if request.operation == pb.OPERATION_ACT else self._stub
        return self._call(stub.Check, request).decision

    def filter_rank(
        self, candidates: Sequence[tuple[str, float]], **options: Unpack[RankOptions]
    ) -> pb.FilterRankResponse:
        """Filter retrieval candidates ``(id, similarity)`` and re-rank the kept ones
        (the keywords: ``messages.RankOptions``)."""
        request = messages.filter_rank(self.namespace, candidates, **options)
        return self._call(self._stub.FilterRank, request)

    def _update_status(
        self, memory_id: str, action: pb.StatusAction, **fields: Any
    ) -> pb.UpdateStatusResponse:
        request = messages.update_status(self.namespace, memory_id, action, **fields)
        return self._call(self._once.UpdateStatus, request)

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
        it is never re-sent. An act that raised ``Unavailable`` (or
        ``DeadlineExceeded``) may still have spent them (the spend can run after the
        sidecar or the deadline gave up): before asking again, read the grant's
        ``used`` with ``explain`` on the memory the grant covers. ``at`` only on a server
        in simulation mode: a normal one decides an act at its own clock."""
        request = messages.act(
            self.namespace, action, args, relies_on=relies_on, actor=actor, budget=budget, at=at
        )
        return self._call(self._once.Check, request).decision

    def grant(self, actions: Sequence[str], **fields: Unpack[GrantFields]) -> pb.Grant:
        """Record the user's delegation (``messages.GrantFields``): a source (a creator
        id or glob) or one memory may fill some arguments of `actions` (names or
        globs), a number of uses, until it expires (unset: one hour); with a value (or
        digest) only an argument of exactly that value is covered. The issuer is
        ``actor`` (unset: the namespace's user); a grant issued by anyone but a user
        has no effect. Never re-sent."""
        request = messages.grant(self.namespace, actions, **fields)
        return self._call(self._once.RecordGrant, request).grant

    def object_to(
        self, memory_id: str, reason: str, *, actor: str | None = None, at: float | None = None
    ) -> pb.ObjectResponse:
        """As an owner of `memory_id`, object to the transition the sweep proposed for
        it (a `proposed` Watch event): it is postponed. Never re-sent."""
        request = messages.objection(self.namespace, memory_id, reason, actor, at)
        return self._call(self._once.Object, request)

    def feedback(
        self,
        decision_id: str,
        memory_ids: Sequence[str],
        success: bool,
        note: str = "",
        at: float | None = None,
    ) -> pb.FeedbackResponse:
        """Report whether what a decision allowed worked out (moves credibility/accuracy)."""
        request = messages.feedback(self.namespace, decision_id, memory_ids, success, note, at)
        return self._call(self._once.Feedback, request)

    def explain(
        self,
        memory_id: str,
        ancestor_depth: int = 0,
        descendant_depth: int = 0,
        decisions: int = 0,
    ) -> pb.ExplainResponse:
        """A memory's lineage graph and recent decisions (0: the server's defaults)."""
        request = messages.explain(
            self.namespace, memory_id, ancestor_depth, descendant_depth, decisions
        )
        return self._call(self._stub.Explain, request)

    def watch(self, cursor: str = "", from_oldest: bool = False) -> WatchStream:
        """Stream lineage events; iterate it, ``cancel()`` it from any thread.

        No deadline applies (a watch is long-lived). On UNAVAILABLE it reconnects
        after the last event's cursor, up to ``retries`` times in a row.
        """

        def open_call(after: str) -> WatchCall:
            self._refuse_if_closed()
            request = messages.watch(self.namespace, after, from_oldest)
            return self._stub.Watch(
                request, metadata=self._metadata, wait_for_ready=self.wait_for_ready
            )

        return WatchStream(
            open_call, cursor, retries=self.retries, sleep=self._sleep, rng=self._rng
        )

    # -- PolicyAdmin
    def list_policies(self) -> pb.ListPoliciesResponse:
        return self._call(self._admin.ListPolicies, pb.ListPoliciesRequest())

    def reload_policies(self, files: Mapping[str, str] | None = None) -> pb.ReloadPoliciesResponse:
        """Reload the configured directory (``files`` None) or swap in the given set."""
        request = pb.ReloadPoliciesRequest(files=dict(files or {}))
        return self._call(self._once_admin.ReloadPolicies, request)

    def shadow(
        self, action: str = "status", files: Mapping[str, str] | None = None
    ) -> pb.ShadowResponse:
        """The shadow candidate (admin): `status`, `load` (the given files, or the
        server's shadow_policy_dir), `promote` (it serves from now on) or `drop`. Never
        re-sent: load, promote and drop share the method."""
        return self._call(self._once_admin.Shadow, messages.shadow(action, files))

    def lint_policy(self, files: Mapping[str, str]) -> pb.LintPolicyResponse:
        request = pb.LintPolicyRequest(files=dict(files))
        return self._call(self._admin.LintPolicy, request)

    def run_sweep(
        self, namespace: str = "", batch: int = 0, at: float | None = None
    ) -> pb.RunSweepResponse:
        """One lifecycle governance pass (admin): archive / evict by value."""
        request = messages.run_sweep(namespace, batch, at)
        return self._call(self._once_admin.RunSweep, request)

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
        response = self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        name: str = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return name


def require_sync_client(client: object, taker: str, why: str) -> None:
    """Refuse, when it is made, a wrapper given anything but a `MemLineageClient`: given
    an `AsyncMemLineageClient`, its calls return coroutines the wrapper never awaits,
    and the first one failed far from the cause (``'coroutine' object has no attribute
    'effect'``). ``taker`` names the wrapper, ``why`` says why it needs the sync one."""
    if not isinstance(client, MemLineageClient):
        raise TypeError(
            f"client: {type(client).__name__} given; {taker} takes a MemLineageClient "
            f"(the synchronous one: {why})"
        )


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
                code, _ = rpc_status(exc)
                if self._cancelled:
                    raise StopIteration from None
                if failures >= self._retries or code != grpc.StatusCode.UNAVAILABLE:
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
