"""`AsyncMemLineageClient`, the asyncio client on `grpc.aio`, and `AsyncWatchStream`.

The same methods, arguments, defaults, errors, deadlines and retry rules as
`MemLineageClient` (`tests/client/test_async_client.py` compares the signatures),
each awaited, so an asyncio agent asks the sidecar without a worker thread per
call. The requests are built by the same code (`messages`); the retries are the
same gRPC service config on the same two channels (`retry`).

Its channels are opened on first use, inside the running event loop (a
`grpc.aio` channel belongs to the loop it was made in), so a client may be built
anywhere but is used from one loop.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, Unpack

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memlineage.client import messages
from memlineage.client.convert import ActArg
from memlineage.client.errors import closed_in_flight, error_from_rpc, rpc_status
from memlineage.client.messages import CheckOptions, GrantFields, MemoryFields, RankOptions
from memlineage.client.retry import backoff_delay, channel_options
from memlineage.client.stubs import (
    AsyncMemLineageStub,
    AsyncPolicyAdminStub,
    AsyncUnary,
    AsyncWatchCall,
    new_async_stubs,
)
from memlineage.client.targets import check_target
from memlineage.v1 import memlineage_pb2 as pb

__all__ = ["AsyncMemLineageClient", "AsyncWatchStream"]

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")


@dataclass(frozen=True, slots=True)
class _Open:
    """The channels and stubs of a client, bound to the loop they were opened in."""

    loop: asyncio.AbstractEventLoop
    channels: tuple[Any, Any]  # grpc.aio.Channel: the retrying one, the once one
    stub: AsyncMemLineageStub
    admin: AsyncPolicyAdminStub
    once: AsyncMemLineageStub
    once_admin: AsyncPolicyAdminStub
    health: Any  # health_pb2_grpc.HealthStub on the retrying channel


class AsyncMemLineageClient:
    """A connection to one MemLineage sidecar from asyncio: `MemLineageClient`'s
    arguments and methods, awaited (``watch`` returns an async iterator).

    ``timeout`` bounds each call including its retries; ``retries`` re-sends of a
    read-only call answered UNAVAILABLE (at most 4); calls that change state are
    never re-sent; ``wait_for_ready`` (None: when ``retries`` > 0) waits for an
    unreachable sidecar until the deadline. ``sleep`` (a coroutine function) and
    ``rng`` pace a Watch's reconnects. Use ``async with`` or ``await close()``.
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
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
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
        self._credentials = credentials
        self._options = tuple(options)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._open: _Open | None = None
        self._closed = False

    # -- lifecycle
    def _opened(self) -> _Open:
        """The channels, opened in the running loop on first use."""
        loop = asyncio.get_running_loop()
        if self._closed:
            raise RuntimeError("AsyncMemLineageClient: the client is closed")
        if self._open is None:
            channels = (self._channel(self.retries), self._channel(0))
            stub, admin = new_async_stubs(channels[0])
            once, once_admin = new_async_stubs(channels[1])
            health = health_pb2_grpc.HealthStub(channels[0])
            self._open = _Open(loop, channels, stub, admin, once, once_admin, health)
        elif self._open.loop is not loop:
            raise RuntimeError(
                "AsyncMemLineageClient: used from another event loop than the one its "
                "channels were opened in; make one client per loop"
            )
        return self._open

    def _channel(self, retries: int) -> Any:
        options = channel_options(retries, self._options)
        if self._credentials is not None:
            return grpc.aio.secure_channel(self.target, self._credentials, options=options)
        return grpc.aio.insecure_channel(self.target, options=options)

    async def close(self) -> None:
        """Close the channels; the client is unusable after. Calls in flight (and Watch
        reads) raise `MemLineageError` CANCELLED, as the sync client's do: their tasks
        were not cancelled, so they are not told they were."""
        self._closed = True
        opened, self._open = self._open, None
        if opened is not None:
            for channel in opened.channels:
                await channel.close()

    async def __aenter__(self) -> AsyncMemLineageClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing
    async def _call(self, method: AsyncUnary[_Req, _Resp], request: _Req) -> _Resp:
        """One unary call under one deadline; gRPC retries it if its channel may."""
        try:
            return await method(
                request,
                timeout=self.timeout,
                metadata=self._metadata,
                wait_for_ready=self.wait_for_ready,
            )
        except grpc.RpcError as exc:  # grpc.aio.AioRpcError
            gone = exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and self._not_ready()
            raise error_from_rpc(exc, self.target if gone else None) from None
        except asyncio.CancelledError:
            if _task_cancelling():
                raise
            raise closed_in_flight() from None

    def _not_ready(self) -> bool:
        """Whether the channels are not connected now (asked on a failed call only)."""
        opened = self._open
        ready = grpc.ChannelConnectivity.READY
        return opened is not None and all(c.get_state() != ready for c in opened.channels)

    # -- MemLineage
    async def record(self, memory_id: str, **fields: Unpack[MemoryFields]) -> pb.RecordResponse:
        """`MemLineageClient.record`, awaited (never re-sent)."""
        request = messages.record(self.namespace, memory_id, **fields)
        return await self._call(self._opened().once.Record, request)

    async def revise(
        self, memory_id: str, *, expected_version: int, **fields: Unpack[MemoryFields]
    ) -> pb.ReviseResponse:
        """`MemLineageClient.revise`, awaited (never re-sent)."""
        request = messages.revise(self.namespace, memory_id, expected_version, **fields)
        return await self._call(self._opened().once.Revise, request)

    async def check(
        self, operation: str, memory_id: str | Sequence[str], **options: Unpack[CheckOptions]
    ) -> pb.Decision:
        """`MemLineageClient.check`, awaited (retried unless the operation is ``act``)."""
        request = messages.check(self.namespace, operation, memory_id, **options)
        opened = self._opened()
        stub = opened.once if request.operation == pb.OPERATION_ACT else opened.stub
        return (await self._call(stub.Check, request)).decision

    async def filter_rank(
        self, candidates: Sequence[tuple[str, float]], **options: Unpack[RankOptions]
    ) -> pb.FilterRankResponse:
        """`MemLineageClient.filter_rank`, awaited."""
        request = messages.filter_rank(self.namespace, candidates, **options)
        return await self._call(self._opened().stub.FilterRank, request)

    async def _update_status(
        self, memory_id: str, action: pb.StatusAction, **fields: Any
    ) -> pb.UpdateStatusResponse:
        request = messages.update_status(self.namespace, memory_id, action, **fields)
        return await self._call(self._opened().once.UpdateStatus, request)

    async def revoke(
        self,
        memory_id: str,
        reason: str = "",
        expected_version: int = 0,
        actor: str | None = None,
        at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """`MemLineageClient.revoke`, awaited."""
        return await self._update_status(
            memory_id,
            pb.STATUS_ACTION_REVOKE,
            reason=reason,
            expected_version=expected_version,
            actor=actor,
            at=at,
        )

    async def supersede(
        self,
        memory_id: str,
        successor_id: str,
        reason: str = "",
        expected_version: int = 0,
        actor: str | None = None,
        at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """`MemLineageClient.supersede`, awaited."""
        return await self._update_status(
            memory_id,
            pb.STATUS_ACTION_SUPERSEDE,
            successor_id=successor_id,
            reason=reason,
            expected_version=expected_version,
            actor=actor,
            at=at,
        )

    async def confirm(
        self,
        memory_id: str,
        reason: str = "",
        expected_version: int = 0,
        actor: str | None = None,
        at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """`MemLineageClient.confirm`, awaited."""
        return await self._update_status(
            memory_id,
            pb.STATUS_ACTION_CONFIRM,
            reason=reason,
            expected_version=expected_version,
            actor=actor,
            at=at,
        )

    async def compress(
        self,
        memory_id: str,
        summary_id: str,
        reason: str = "",
        expected_version: int = 0,
        actor: str | None = None,
        at: float | None = None,
    ) -> pb.UpdateStatusResponse:
        """`MemLineageClient.compress`, awaited."""
        return await self._update_status(
            memory_id,
            pb.STATUS_ACTION_COMPRESS,
            successor_id=summary_id,
            reason=reason,
            expected_version=expected_version,
            actor=actor,
            at=at,
        )

    async def act(
        self,
        action: str,
        args: Mapping[str, Sequence[str] | ActArg] | None = None,
        *,
        relies_on: Sequence[str] = (),
        actor: str | None = None,
        budget: float | None = None,
        at: float | None = None,
    ) -> pb.Decision:
        """`MemLineageClient.act`, awaited: an allowed act spends grant uses, so it is
        sent once, on the channel that never retries."""
        request = messages.act(
            self.namespace, action, args, relies_on=relies_on, actor=actor, budget=budget, at=at
        )
        return (await self._call(self._opened().once.Check, request)).decision

    async def grant(self, actions: Sequence[str], **fields: Unpack[GrantFields]) -> pb.Grant:
        """`MemLineageClient.grant`, awaited (never re-sent)."""
        request = messages.grant(self.namespace, actions, **fields)
        return (await self._call(self._opened().once.RecordGrant, request)).grant

    async def object_to(
        self, memory_id: str, reason: str, *, actor: str | None = None, at: float | None = None
    ) -> pb.ObjectResponse:
        """`MemLineageClient.object_to`, awaited (never re-sent)."""
        request = messages.objection(self.namespace, memory_id, reason, actor, at)
        return await self._call(self._opened().once.Object, request)

    async def feedback(
        self,
        decision_id: str,
        memory_ids: Sequence[str],
        success: bool,
        note: str = "",
        at: float | None = None,
    ) -> pb.FeedbackResponse:
        """`MemLineageClient.feedback`, awaited (never re-sent: it would count twice)."""
        request = messages.feedback(self.namespace, decision_id, memory_ids, success, note, at)
        return await self._call(self._opened().once.Feedback, request)

    async def explain(
        self,
        memory_id: str,
        ancestor_depth: int = 0,
        descendant_depth: int = 0,
        decisions: int = 0,
    ) -> pb.ExplainResponse:
        """`MemLineageClient.explain`, awaited."""
        request = messages.explain(
            self.namespace, memory_id, ancestor_depth, descendant_depth, decisions
        )
        return await self._call(self._opened().stub.Explain, request)

    def watch(self, cursor: str = "", from_oldest: bool = False) -> AsyncWatchStream:
        """Stream lineage events: ``async for event in client.watch(): ...``;
        ``cancel()`` ends it. As `MemLineageClient.watch`: no deadline, and on
        UNAVAILABLE a reconnect after the last event, up to ``retries`` in a row."""

        def open_call(after: str) -> AsyncWatchCall:
            request = messages.watch(self.namespace, after, from_oldest)
            return self._opened().stub.Watch(
                request, metadata=self._metadata, wait_for_ready=self.wait_for_ready
            )

        return AsyncWatchStream(
            open_call, cursor, retries=self.retries, sleep=self._sleep, rng=self._rng
        )

    # -- PolicyAdmin
    async def list_policies(self) -> pb.ListPoliciesResponse:
        return await self._call(self._opened().admin.ListPolicies, pb.ListPoliciesRequest())

    async def reload_policies(
        self, files: Mapping[str, str] | None = None
    ) -> pb.ReloadPoliciesResponse:
        """`MemLineageClient.reload_policies`, awaited (never re-sent)."""
        request = pb.ReloadPoliciesRequest(files=dict(files or {}))
        return await self._call(self._opened().once_admin.ReloadPolicies, request)

    async def shadow(
        self, action: str = "status", files: Mapping[str, str] | None = None
    ) -> pb.ShadowResponse:
        """`MemLineageClient.shadow`, awaited (never re-sent)."""
        request = messages.shadow(action, files)
        return await self._call(self._opened().once_admin.Shadow, request)

    async def lint_policy(self, files: Mapping[str, str]) -> pb.LintPolicyResponse:
        request = pb.LintPolicyRequest(files=dict(files))
        return await self._call(self._opened().admin.LintPolicy, request)

    async def run_sweep(
        self, namespace: str = "", batch: int = 0, at: float | None = None
    ) -> pb.RunSweepResponse:
        """`MemLineageClient.run_sweep`, awaited (never re-sent)."""
        request = messages.run_sweep(namespace, batch, at)
        return await self._call(self._opened().once_admin.RunSweep, request)

    # -- grpc.health.v1
    async def health(self, service: str = "") -> str:
        """The serving status name, e.g. "SERVING" or "NOT_SERVING"."""
        request = health_pb2.HealthCheckRequest(service=service)
        response = await self._call(self._opened().health.Check, request)
        name: str = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return name


def _task_cancelling() -> bool:
    """Whether the running task is being cancelled. A grpc.aio call raises
    CancelledError also when its channel is closed under it; that one is the client's
    close, not the caller's cancellation."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


class AsyncWatchStream(AsyncIterator[pb.LineageEvent]):
    """The events of a Watch, read with ``async for``; ``cancel()`` ends the
    iteration cleanly (a pending read returns StopAsyncIteration)."""

    def __init__(
        self,
        open_call: Callable[[str], AsyncWatchCall],
        cursor: str,
        *,
        retries: int,
        sleep: Callable[[float], Awaitable[None]],
        rng: Callable[[], float],
    ) -> None:
        self._open = open_call
        self.cursor = cursor  # the last event seen: where a reconnect resumes
        self._retries = retries
        self._sleep = sleep
        self._rng = rng
        self._call: AsyncWatchCall | None = None
        self._cancelled = False

    def __aiter__(self) -> AsyncWatchStream:
        return self

    async def __anext__(self) -> pb.LineageEvent:
        failures = 0
        while True:
            if self._cancelled:
                raise StopAsyncIteration
            if self._call is None:
                self._call = self._open(self.cursor)
            call = self._call
            try:
                event = await call.read()
            except asyncio.CancelledError:
                self._forget(call)
                if _task_cancelling():
                    raise  # the reading task itself was cancelled: not ours to swallow
                if self._cancelled:
                    raise StopAsyncIteration from None
                raise closed_in_flight() from None  # the client closed its channel
            except grpc.RpcError as exc:
                self._forget(call)
                if self._cancelled:
                    raise StopAsyncIteration from None
                code, _ = rpc_status(exc)
                if failures >= self._retries or code != grpc.StatusCode.UNAVAILABLE:
                    raise error_from_rpc(exc) from None
                await self._sleep(backoff_delay(failures, rng=self._rng))
                failures += 1
                continue
            if event is grpc.aio.EOF:
                self._forget(call)
                raise StopAsyncIteration
            if event.cursor:
                self.cursor = event.cursor
            assert isinstance(event, pb.LineageEvent)
            return event

    def _forget(self, call: AsyncWatchCall) -> None:
        if self._call is call:
            self._call = None

    def cancel(self) -> None:
        """Stop the stream; a pending ``__anext__`` raises StopAsyncIteration."""
        self._cancelled = True
        call, self._call = self._call, None
        if call is not None:
            call.cancel()

    close = cancel

    async def __aenter__(self) -> AsyncWatchStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()
