"""Health and reflection, registered the way the business services are.

grpcio's own registration parses a request inside grpc: bytes that are not the
message answer INTERNAL "Exception deserializing request!" and log a traceback, one
per call, on services anyone may call without a token (health always). Here the
request is parsed by a function that never raises and the handler answers
INVALID_ARGUMENT `request: ...`, as every MemLineage RPC does. Each service also runs
on a small pool of its own (the sync server's per-handler `experimental_thread_pool`):
calls to them that never send their request hold those threads, not the workers the
MemLineage RPCs need, and the reverse. Health's pools grow for such calls as the
server's does (`call_pool.CallPool`): a probe's Check is answered while they are
held. Reflection's streams (request-streaming: started at once) hold its threads while
open.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from memlineage.grpc_api.call_pool import CallPool
from memlineage.grpc_api.registration import Caught

HEALTH_THREADS = 8
"""Threads of health Check, which probes ask (Kubernetes: liveness and readiness)."""
HEALTH_WATCH_STREAMS = 8
"""Health Watch streams open at once (anyone may open them, without a token); the next
is RESOURCE_EXHAUSTED at once (before: it waited on the pool until its deadline, so 8
streams held open kept every other health Watch waiting; an outside audit)."""
HEALTH_WATCH_THREADS = 2 * HEALTH_WATCH_STREAMS
"""Threads of health Watch, a pool of its own: each open stream holds its thread (on
Check's pool 8 of them made every probe time out: a restart loop for an orchestrator
that probes it); the threads past the streams' bound answer the refusals."""
REFLECTION_THREADS = 4


class Undecodable:
    """What the safe parser hands over for bytes that are not the message."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


def safe_parser(parse: Callable[[bytes], Any], name: str) -> Callable[[bytes], Any]:
    def parsed(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception as exc:  # DecodeError, or anything the bytes make it raise
            return Undecodable(f"request: is not a valid {name} message ({exc})")

    return parsed


def _refused(request: Any, context: grpc.ServicerContext) -> None:
    if isinstance(request, Undecodable):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.problem)


def _guarded(h: grpc.RpcMethodHandler, pool: CallPool, name: str) -> Any:
    """`h` with a request parser that never raises, its behaviour refusing what did not
    parse, on `pool`, which its behaviour tells when it starts (a unary request came; a
    request stream is read by the behaviour itself)."""
    parse = safe_parser(h.request_deserializer, name)
    received = pool.received
    if h.unary_unary is not None:
        unary = h.unary_unary

        def one(request: Any, context: grpc.ServicerContext) -> Any:
            received()
            _refused(request, context)
            return unary(request, context)

        one.experimental_thread_pool = pool  # type: ignore[attr-defined]  # grpc reads it
        return h._replace(request_deserializer=parse, unary_unary=one)
    if h.unary_stream is not None:
        stream = h.unary_stream

        def many(request: Any, context: grpc.ServicerContext) -> Any:
            received()
            _refused(request, context)
            yield from stream(request, context)

        many.experimental_thread_pool = pool  # type: ignore[attr-defined]
        return h._replace(request_deserializer=parse, unary_stream=many)
    if h.stream_stream is not None:
        both = h.stream_stream

        def each(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            received()

            def checked() -> Iterator[Any]:
                for request in requests:
                    _refused(request, context)
                    yield request

            yield from both(checked(), context)

        each.experimental_thread_pool = pool  # type: ignore[attr-defined]
        return h._replace(request_deserializer=parse, stream_stream=each)
    raise TypeError(f"{name}: a handler kind this module does not guard")


def _register(
    caught: Caught,
    server: Any,
    pool: CallPool,
    own: dict[str, CallPool] | None = None,
) -> None:
    """Register the caught service on `pool`; `own`: methods on a pool of their own."""
    handlers = {
        method: _guarded(h, (own or {}).get(method, pool), f"{caught.service}.{method} request")
        for method, h in caught.handlers.items()
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(caught.service, handlers),)
    )
    server.add_registered_method_handlers(caught.service, handlers)


class NamedHealth(health.HealthServicer):
    """grpcio's health service, whose NOT_FOUND for a service it does not know says
    so and names those it serves (grpcio's answers NOT_FOUND with no message), and
    whose Watch streams are bounded (`HEALTH_WATCH_STREAMS`)."""

    def __init__(self) -> None:
        super().__init__()
        self._streams = threading.BoundedSemaphore(HEALTH_WATCH_STREAMS)

    def Watch(
        self, request: Any, context: grpc.ServicerContext, send_response_callback: Any = None
    ) -> Any:
        if not self._streams.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{HEALTH_WATCH_STREAMS} health Watch streams are open: ask Check, or close one",
            )
        context.add_callback(self._streams.release)  # when the stream ends, however
        return super().Watch(request, context, send_response_callback)

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            served = sorted(self._server_status)
        if request.service not in served:
            context.abort(grpc.StatusCode.NOT_FOUND, not_served(request.service, served))
        return super().Check(request, context)


def not_served(service: str, served: list[str]) -> str:
    """Health's NOT_FOUND message: the service asked for, and those it knows."""
    names = ", ".join(repr(n) for n in served)
    return (
        f"service: {service!r} is not served here; health knows {names} "
        "('' is the server as a whole)"
    )


def add_health(servicer: health.HealthServicer, server: Any) -> list[CallPool]:
    """Register `servicer` on `server`, Check and Watch each on a pool of its own;
    returns the pools (shut down with the server)."""
    caught = Caught()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, caught)
    check = CallPool(HEALTH_THREADS, name="memlineage-health")
    watch = CallPool(HEALTH_WATCH_THREADS, name="memlineage-health-watch")
    _register(caught, server, check, {"Watch": watch})
    return [check, watch]


def add_reflection(names: tuple[str, ...], server: Any) -> list[CallPool]:
    """Reflection of `names` (and of itself) on `server`; returns its pool."""
    caught = Caught()
    reflection.enable_server_reflection((*names, reflection.SERVICE_NAME), caught)
    pool = CallPool(REFLECTION_THREADS, name="memlineage-reflect")
    _register(caught, server, pool)
    return [pool]


__all__ = [
    "HEALTH_THREADS",
    "HEALTH_WATCH_STREAMS",
    "HEALTH_WATCH_THREADS",
    "REFLECTION_THREADS",
    "NamedHealth",
    "Undecodable",
    "add_health",
    "add_reflection",
    "not_served",
    "safe_parser",
]
