"""Typed shapes of the generated gRPC stubs (the generator writes them untyped).

`new_stubs` builds the generated `MemLineageStub` and `PolicyAdminStub` on a
channel and hands them back under these shapes, so each call's response type is
known to the type checker (and to editors) without touching generated code.
`new_async_stubs` does the same on a `grpc.aio` channel, where a unary call is
awaited and a server stream is read asynchronously.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc

__all__ = [
    "AsyncMemLineageStub",
    "AsyncPolicyAdminStub",
    "AsyncServerStream",
    "AsyncUnary",
    "AsyncWatchCall",
    "MemLineageStub",
    "PolicyAdminStub",
    "ServerStream",
    "Unary",
    "WatchCall",
    "new_async_stubs",
    "new_stubs",
]

Metadata = Sequence[tuple[str, str]]

_Req = TypeVar("_Req", contravariant=True)
_Resp = TypeVar("_Resp", covariant=True)


class Unary(Protocol[_Req, _Resp]):
    """A unary-unary stub method: one request, one response (or grpc.RpcError)."""

    def __call__(
        self,
        request: _Req,
        /,
        *,
        timeout: float | None = ...,
        metadata: Metadata = ...,
        wait_for_ready: bool | None = ...,
    ) -> _Resp: ...


class WatchCall(Iterator[pb.LineageEvent], Protocol):
    """A server-streaming call in flight: iterate it; ``cancel()`` ends it."""

    def cancel(self) -> bool: ...


class ServerStream(Protocol[_Req]):
    """A unary-stream stub method returning the call it started."""

    def __call__(
        self,
        request: _Req,
        /,
        *,
        timeout: float | None = ...,
        metadata: Metadata = ...,
        wait_for_ready: bool | None = ...,
    ) -> WatchCall: ...


class MemLineageStub(Protocol):
    Record: Unary[pb.RecordRequest, pb.RecordResponse]
    Check: Unary[pb.CheckRequest, pb.CheckResponse]
    FilterRank: Unary[pb.FilterRankRequest, pb.FilterRankResponse]
    UpdateStatus: Unary[pb.UpdateStatusRequest, pb.UpdateStatusResponse]
    Revise: Unary[pb.ReviseRequest, pb.ReviseResponse]
    Feedback: Unary[pb.FeedbackRequest, pb.FeedbackResponse]
    RecordGrant: Unary[pb.GrantRequest, pb.GrantResponse]
    Object: Unary[pb.ObjectRequest, pb.ObjectResponse]
    Explain: Unary[pb.ExplainRequest, pb.ExplainResponse]
    Watch: ServerStream[pb.WatchRequest]


class PolicyAdminStub(Protocol):
    ListPolicies: Unary[pb.ListPoliciesRequest, pb.ListPoliciesResponse]
    ReloadPolicies: Unary[pb.ReloadPoliciesRequest, pb.ReloadPoliciesResponse]
    LintPolicy: Unary[pb.LintPolicyRequest, pb.LintPolicyResponse]
    RunSweep: Unary[pb.RunSweepRequest, pb.RunSweepResponse]
    Shadow: Unary[pb.ShadowRequest, pb.ShadowResponse]


class AsyncUnary(Protocol[_Req, _Resp]):
    """A unary-unary method on a `grpc.aio` channel: await it for the response."""

    def __call__(
        self,
        request: _Req,
        /,
        *,
        timeout: float | None = ...,
        metadata: Metadata = ...,
        wait_for_ready: bool | None = ...,
    ) -> Awaitable[_Resp]: ...


class AsyncWatchCall(Protocol):
    """A `grpc.aio` server-streaming call: ``read()`` the next event (``grpc.aio.EOF``
    at the end); ``cancel()`` ends it."""

    def __aiter__(self) -> AsyncIterator[pb.LineageEvent]: ...

    async def read(self) -> Any: ...

    def cancel(self) -> bool: ...


class AsyncServerStream(Protocol[_Req]):
    """A unary-stream method on a `grpc.aio` channel returning the call it started."""

    def __call__(
        self,
        request: _Req,
        /,
        *,
        timeout: float | None = ...,
        metadata: Metadata = ...,
        wait_for_ready: bool | None = ...,
    ) -> AsyncWatchCall: ...


class AsyncMemLineageStub(Protocol):
    Record: AsyncUnary[pb.RecordRequest, pb.RecordResponse]
    Check: AsyncUnary[pb.CheckRequest, pb.CheckResponse]
    FilterRank: AsyncUnary[pb.FilterRankRequest, pb.FilterRankResponse]
    UpdateStatus: AsyncUnary[pb.UpdateStatusRequest, pb.UpdateStatusResponse]
    Revise: AsyncUnary[pb.ReviseRequest, pb.ReviseResponse]
    Feedback: AsyncUnary[pb.FeedbackRequest, pb.FeedbackResponse]
    RecordGrant: AsyncUnary[pb.GrantRequest, pb.GrantResponse]
    Object: AsyncUnary[pb.ObjectRequest, pb.ObjectResponse]
    Explain: AsyncUnary[pb.ExplainRequest, pb.ExplainResponse]
    Watch: AsyncServerStream[pb.WatchRequest]


class AsyncPolicyAdminStub(Protocol):
    ListPolicies: AsyncUnary[pb.ListPoliciesRequest, pb.ListPoliciesResponse]
    ReloadPolicies: AsyncUnary[pb.ReloadPoliciesRequest, pb.ReloadPoliciesResponse]
    LintPolicy: AsyncUnary[pb.LintPolicyRequest, pb.LintPolicyResponse]
    RunSweep: AsyncUnary[pb.RunSweepRequest, pb.RunSweepResponse]
    Shadow: AsyncUnary[pb.ShadowRequest, pb.ShadowResponse]


# The generated classes take a grpc.Channel and set one attribute per RPC; their
# untyped constructors are declared here with the shapes above.
_memlineage_stub: Callable[[Any], MemLineageStub] = pb_grpc.MemLineageStub
_policy_admin_stub: Callable[[Any], PolicyAdminStub] = pb_grpc.PolicyAdminStub
_async_memlineage_stub: Callable[[Any], AsyncMemLineageStub] = pb_grpc.MemLineageStub
_async_policy_admin_stub: Callable[[Any], AsyncPolicyAdminStub] = pb_grpc.PolicyAdminStub


def new_stubs(channel: Any) -> tuple[MemLineageStub, PolicyAdminStub]:
    """The MemLineage and PolicyAdmin stubs on ``channel`` (a grpc.Channel)."""
    return _memlineage_stub(channel), _policy_admin_stub(channel)


def new_async_stubs(channel: Any) -> tuple[AsyncMemLineageStub, AsyncPolicyAdminStub]:
    """The same stubs on ``channel`` (a grpc.aio.Channel): the generated classes only
    call ``channel.unary_unary`` / ``unary_stream``, which an aio channel answers with
    awaitable calls."""
    return _async_memlineage_stub(channel), _async_policy_admin_stub(channel)
