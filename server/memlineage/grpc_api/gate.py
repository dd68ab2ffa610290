"""Callers are authenticated from their headers, before a worker waits for their bytes.

The synchronous gRPC server hands a call to a thread, which then waits for the
request message; a client that opens calls and never sends one holds a thread each
(the pool grows for such calls, `call_pool.py`, up to a bound; a caller holding
`HELD_PER_CALLER` of them is answered RESOURCE_EXHAUSTED here, from its headers,
until some end). With tokens configured, this interceptor checks the
`authorization` header as the call arrives (on the server's own thread, before any
worker is given the call): a call with no valid token, or with two `authorization`
headers, is answered UNAUTHENTICATED by a handler that reads nothing, so it holds no
worker. The health service stays open (orchestrators probe it without a token); the
servicers check namespaces and admin rights as before. What an authenticated caller
can still hold is in README.md ("Bounds a caller meets").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import grpc

from memlineage.grpc_api.aio_handlers import Aborted, SyncContext, end
from memlineage.grpc_api.auth import Authenticator, Principal, Unauthenticated
from memlineage.grpc_api.call_pool import CallPool
from memlineage.grpc_api.servicer import abort_with, loggable
from memlineage.metrics import Metrics

OPEN_SERVICES = ("/grpc.health.v1.Health/",)
LOG_EVERY_SECONDS = 60.0
"""Refused calls are counted always (`memlineage_unauthenticated_total`) and logged at
most this often per reason, with how many since the last line (a flood of bad tokens
must not flood the log)."""

HELD_PER_CALLER = 32
"""Calls of one caller (a token) a pool may have whose request has not come, queued or
on a thread (`call_pool.CallPool.unread_by`): past it, its next calls are answered
RESOURCE_EXHAUSTED at once, so one tenant cannot take the threads the pool grows for
everyone (counted from the first call of a burst: counting only calls that had waited
0.25 s let 400 opened at once take all 256 threads; an outside audit). The unary pool
and the Watch pool each count. Without tokens every caller is one: no such limit."""

WATCH = "/memlineage.v1.MemLineage/Watch"
"""The method whose calls run on the Watch pool (`registration.on_pool`)."""

log = logging.getLogger("memlineage.auth")


class Refusal(NamedTuple):
    """Why a call is refused at the header stage: the error, and its metric label."""

    exc: Unauthenticated
    reason: str


class AuthGate(grpc.ServerInterceptor):
    """UNAUTHENTICATED at the header stage for every call but the open services';
    RESOURCE_EXHAUSTED for a caller holding `HELD_PER_CALLER` calls on `pool`."""

    def __init__(
        self,
        auth: Authenticator,
        metrics: Metrics | None = None,
        pool: CallPool | None = None,
        watch_pool: CallPool | None = None,
    ) -> None:
        self._auth = auth
        self._metrics = metrics
        self._pool = pool
        self._watch_pool = watch_pool
        self._lock = threading.Lock()
        self._said: dict[str, tuple[float, int]] = {}  # reason -> (last line, refused since)

    def refused(self, reason: str, method: str, peer: str) -> None:
        """Count a refusal; log it unless a line for `reason` went out lately."""
        if self._metrics is not None:
            self._metrics.unauthenticated.labels(reason).inc()
        more = self._say(reason)
        if more is not None:
            log.warning(
                "refused a call without a valid token (%s) from %s to %s%s",
                reason,
                loggable(peer),
                loggable(method),
                more,
            )

    def _say(self, key: str) -> str | None:
        """None when a line for `key` went out in the last LOG_EVERY_SECONDS (this one
        is counted instead); else what to append: how many were not said since."""
        now = time.monotonic()
        with self._lock:
            last, since = self._said.get(key, (-LOG_EVERY_SECONDS, 0))
            if now - last < LOG_EVERY_SECONDS:
                self._said[key] = (last, since + 1)
                return None
            self._said[key] = (now, 0)
        return f" ({since} more since the last line)" if since else ""

    def admit(self, method: str, metadata: Any) -> Principal | Refusal | None:
        """Whether a call to `method` with `metadata` (its headers) goes on: None for
        the open services (no token asked), the caller's principal, or why it is
        refused."""
        if method.startswith(OPEN_SERVICES):
            return None
        headers = [v for k, v in metadata or () if k == "authorization"]
        reason = "duplicate" if len(headers) > 1 else "missing" if not headers else "unknown"
        try:
            if len(headers) > 1:
                raise Unauthenticated("more than one `authorization` header")
            return self._auth.principal({"authorization": headers[0]} if headers else {})
        except Unauthenticated as exc:
            if reason == "unknown" and not str(headers[0]).lower().startswith("bearer "):
                reason = "missing"  # a header that names no bearer token
            return Refusal(exc, reason)

    def intercept_service(
        self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        method: str = details.method or ""
        verdict = self.admit(method, details.invocation_metadata)
        if verdict is None:
            return continuation(details)
        pool = self._watch_pool if method == WATCH else self._pool
        if pool is not None:  # until it is known whose call this is (a refusal: no one's)
            pool.for_caller(None)
        if isinstance(verdict, Refusal):
            return self._refusal(verdict.exc, verdict.reason, method)
        if pool is not None:
            if pool.unread_by(verdict.name) >= HELD_PER_CALLER:
                return self._holding(verdict.name, method)
            pool.for_caller(verdict.name)  # grpc submits this call next, on this thread
        return continuation(details)

    def _holding(self, caller: str, method: str) -> grpc.RpcMethodHandler:
        """RESOURCE_EXHAUSTED at once (read nothing, as `_refusal`): `caller` holds its
        share of calls that never sent their request."""
        message = (
            f"caller {caller!r} holds {HELD_PER_CALLER} calls that have not sent their "
            "request or wait for a thread: send, cancel or await them (each gives its "
            "place back when its request comes or it ends)"
        )

        def refuse(requests: Any, context: grpc.ServicerContext) -> Any:
            more = self._say(f"held:{caller}")
            if more is not None:
                log.warning("refused a call of %s to %s: %s%s", caller, method, message, more)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

        return grpc.stream_unary_rpc_method_handler(refuse)

    def _refusal(self, exc: Unauthenticated, reason: str, method: str) -> grpc.RpcMethodHandler:
        """A handler that answers at once: request-streaming, so grpc runs it without
        first waiting for a message (the client's unary or streaming call sees the
        same status)."""

        def refuse(requests: Any, context: grpc.ServicerContext) -> Any:
            self.refused(reason, method, context.peer() or "")
            abort_with(exc, context)

        return grpc.stream_unary_rpc_method_handler(refuse)


class AioAuthGate(grpc.aio.ServerInterceptor):
    """`AuthGate` on grpc.aio (`grpc_runtime = "aio"`): the same refusals, at the same
    stage. No per-caller bound on held calls: a call there waiting for its request
    holds no thread."""

    def __init__(self, gate: AuthGate) -> None:
        self._gate = gate

    async def intercept_service(
        self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        method: str = details.method or ""
        verdict = self._gate.admit(method, details.invocation_metadata)
        if not isinstance(verdict, Refusal):
            return await continuation(details)
        gate = self._gate

        async def refuse(requests: Any, call: grpc.aio.ServicerContext) -> None:
            gate.refused(verdict.reason, method, call.peer() or "")
            context = SyncContext(call)
            try:
                abort_with(verdict.exc, cast(grpc.ServicerContext, context))
            except Aborted as aborted:
                await end(call, context, aborted)

        return grpc.stream_unary_rpc_method_handler(refuse)


__all__ = ["HELD_PER_CALLER", "OPEN_SERVICES", "AioAuthGate", "AuthGate", "Refusal"]
