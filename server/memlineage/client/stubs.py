"""Typed shapes of the generated gRPC stubs (the generator writes them untyped).

`new_stubs` builds the generated `MemLineageStub` and `PolicyAdminStub` on a
channel and hands them back under these shapes, so each call's response type is
known to the type checker (and to editors) without touching generated code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc

__all__ = ["MemLineageStub", "PolicyAdminStub", "ServerStream", "Unary", "WatchCall", "new_stubs"]

Metadata = Sequence[tuple[str, str]]

_Req = TypeVar("_Req", contravariant=True)
_Resp = TypeVar("_Resp", covariant=True)


class Unary(Protocol[_Req, _Resp]):
    """A unary-unary stub method: one request, one response (or grpc.RpcError)."""

    def __call__(
        self, request: _Req, /, *, timeout: float | None = ..., metadata: Metadata = ...
    ) -> _Resp: ...


class WatchCall(Iterator[pb.LineageEvent], Protocol):
    """A server-streaming call in flight: iterate it; ``cancel()`` ends it."""

    def cancel(self) -> bool: ...


class ServerStream(Protocol[_Req]):
    """A unary-stream stub method returning the call it started."""

    def __call__(
        self, request: _Req, /, *, timeout: float | None = ..., metadata: Metadata = ...
    ) -> WatchCall: ...


class MemLineageStub(Protocol):
    Record: Unary[pb.RecordRequest, pb.RecordResponse]
    Check: Unary[pb.CheckRequest, pb.CheckResponse]
    FilterRank: Unary[pb.FilterRankRequest, pb.FilterRankResponse]
    UpdateStatus: Unary[pb.UpdateStatusRequest, pb.UpdateStatusResponse]
    Feedback: Unary[pb.FeedbackRequest, pb.FeedbackResponse]
    RecordGrant: Unary[pb.GrantRequest, pb.GrantResponse]
    Explain: Unary[pb.ExplainRequest, pb.ExplainResponse]
    Watch: ServerStream[pb.WatchRequest]


class PolicyAdminStub(Protocol):
    ListPolicies: Unary[pb.ListPoliciesRequest, pb.ListPoliciesResponse]
    ReloadPolicies: Unary[pb.ReloadPoliciesRequest, pb.ReloadPoliciesResponse]
    LintPolicy: Unary[pb.LintPolicyRequest, pb.LintPolicyResponse]
    RunSweep: Unary[pb.RunSweepRequest, pb.RunSweepResponse]


# The generated classes take a grpc.Channel and set one attribute per RPC; their
# untyped constructors are declared here with the shapes above.
_memlineage_stub: Callable[[Any], MemLineageStub] = pb_grpc.MemLineageStub
_policy_admin_stub: Callable[[Any], PolicyAdminStub] = pb_grpc.PolicyAdminStub


def new_stubs(channel: Any) -> tuple[MemLineageStub, PolicyAdminStub]:
    """The MemLineage and PolicyAdmin stubs on ``channel`` (a grpc.Channel)."""
    return _memlineage_stub(channel), _policy_admin_stub(channel)
