"""Callers are authenticated from their headers, before a worker waits for their bytes.

The synchronous gRPC server hands a call to a worker thread, which then waits for the
request message; a client that opens calls and never sends one holds a worker each,
and four of them (the embedded store's pool) stopped every other tenant's calls. With
tokens configured, this interceptor checks the `authorization` header as the call
arrives (on the server's own thread, before any worker is given the call): a call with
no valid token, or with two `authorization` headers, is answered UNAUTHENTICATED by a
handler that reads nothing, so it holds no worker. The health service stays open
(orchestrators probe it without a token); the servicers check namespaces and admin
rights as before. What an authenticated caller can still hold is in README.md
("Bounds a caller meets").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from memlineage.grpc_api.auth import Authenticator, Unauthenticated
from memlineage.grpc_api.servicer import details_of

OPEN_SERVICES = ("/grpc.health.v1.Health/",)


class AuthGate(grpc.ServerInterceptor):
    """UNAUTHENTICATED at the header stage for every call but the open services'."""

    def __init__(self, auth: Authenticator) -> None:
        self._auth = auth

    def intercept_service(
        self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        method: str = details.method or ""
        if method.startswith(OPEN_SERVICES):
            return continuation(details)
        headers = [v for k, v in details.invocation_metadata or () if k == "authorization"]
        try:
            if len(headers) > 1:
                raise Unauthenticated("more than one `authorization` header")
            self._auth.principal({"authorization": headers[0]} if headers else {})
        except Unauthenticated as exc:
            return _refusal(details_of(exc))
        return continuation(details)


def _refusal(message: str) -> grpc.RpcMethodHandler:
    """A handler that answers at once: request-streaming, so grpc runs it without first
    waiting for a message (the client's unary or streaming call sees the same status)."""

    def refuse(requests: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    return grpc.stream_unary_rpc_method_handler(refuse)


__all__ = ["OPEN_SERVICES", "AuthGate"]
