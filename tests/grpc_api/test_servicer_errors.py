"""The servicers' error mapping on a real gRPC server: a bug (an exception no
domain error explains) is INTERNAL with a short message and its traceback in the
log, never grpc's UNKNOWN carrying the exception's text; the request is parsed
from its bytes after the caller is known."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from memlineage.grpc_api.admin_servicer import PolicyAdminService
from memlineage.grpc_api.auth import Authenticator, Principal, TokenGrant
from memlineage.grpc_api.servicer import register, rpc
from memlineage.metrics import Metrics
from memlineage.v1 import memlineage_pb2 as pb

LIST = "/memlineage.v1.PolicyAdmin/ListPolicies"


class Faulty(PolicyAdminService):
    """ListPolicies with a bug in it; the wrapper and registration are the real ones."""

    @rpc(pb.ListPoliciesRequest)
    def ListPolicies(
        self, request: pb.ListPoliciesRequest, context: Any, principal: Principal
    ) -> pb.ListPoliciesResponse:
        assert isinstance(request, pb.ListPoliciesRequest)  # parsed before the call
        raise KeyError("secret-internal-detail")


@pytest.fixture
def served() -> Iterator[tuple[str, Metrics]]:
    metrics = Metrics()
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    # No engine: the faulty RPC never reaches one.
    service = Faulty(
        None,
        Authenticator([TokenGrant("t", ("ns",), admin=True)]),  # type: ignore[arg-type]  # no engine needed
        metrics,
    )
    register(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", metrics
    finally:
        server.stop(0)


def _call(address: str, data: bytes, token: str | None = "t") -> grpc.RpcError:
    md = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(LIST, request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as info:
            call(data, metadata=md, timeout=10)
    return info.value


def test_a_bug_is_internal_short_and_logged(
    served: tuple[str, Metrics], caplog: pytest.LogCaptureFixture
) -> None:
    address, metrics = served
    with caplog.at_level(logging.ERROR, logger="memlineage.grpc"):
        err = _call(address, b"")
    assert err.code() == grpc.StatusCode.INTERNAL
    assert err.details() == "internal error in ListPolicies; the sidecar's log has the details"
    logged = [r for r in caplog.records if r.name == "memlineage.grpc"]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert logged[0].exc_info[0] is KeyError
    assert "ListPolicies" in logged[0].getMessage()
    assert (
        metrics.registry.get_sample_value(
            "memlineage_rpc_errors_total", {"method": "ListPolicies", "code": "INTERNAL"}
        )
        == 1.0
    )


def test_the_caller_is_known_before_the_bytes_are_parsed(served: tuple[str, Metrics]) -> None:
    address, _ = served
    assert _call(address, b"\x0a\x05ab", token=None).code() == grpc.StatusCode.UNAUTHENTICATED
    err = _call(address, b"\x0a\x05ab")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith(
        "request: is not a valid memlineage.v1.ListPoliciesRequest message ("
    ), err.details()
