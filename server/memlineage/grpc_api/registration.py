"""How the servicers' methods are put on the synchronous gRPC server: every request
handed over as its bytes, Check's and FilterRank's answers sent as the bytes the
servicer encoded, and each call run on a `CallPool` (`call_pool.py`), told when its
request came.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import grpc

from memlineage.grpc_api.call_pool import CallPool

ENCODED = ("Check", "FilterRank")
"""Answers the servicers return already encoded (bytes), passed through untouched."""


class Caught:
    """Stands in for a server to catch what a generated ``add_*_to_server`` registers."""

    service: str
    handlers: dict[str, Any]

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.service, self.handlers = service, handlers


def on_pool(behaviour: Callable[..., Any], pool: CallPool) -> Callable[..., Any]:
    """`behaviour` (a unary-stream handler) run on `pool` instead of the server's
    threads (the sync server's per-handler `experimental_thread_pool`), telling it when
    the request came: a Watch lives for minutes."""
    received = pool.received

    def handler(request: Any, context: grpc.ServicerContext) -> Any:
        received()
        yield from behaviour(request, context)

    handler.experimental_thread_pool = pool  # type: ignore[attr-defined]  # grpc reads it off the function
    return handler


def as_is(response: Any) -> bytes:
    """The serializer of Check's and FilterRank's answers: the bytes the servicer
    encoded, passed through (a message, as other servers' stubs may return, serialized)."""
    return response if type(response) is bytes else response.SerializeToString()


def as_bytes(service: Any, add_to_server: Callable[[Any, Any], None]) -> tuple[str, dict[str, Any]]:
    """The service name and method handlers ``add_to_server`` (a generated
    ``add_*Servicer_to_server``) registers, with every request handed over as its bytes
    and Check's and FilterRank's answers sent as the bytes the servicer encoded: what
    both runtimes serve (`register` here, `aio_handlers.register`)."""
    caught = Caught()
    add_to_server(service, caught)
    handlers = {}
    for name, h in caught.handlers.items():
        h = h._replace(request_deserializer=None)
        handlers[name] = h._replace(response_serializer=as_is) if name in ENCODED else h
    return caught.service, handlers


def register(
    service: Any,
    add_to_server: Callable[[Any, Any], None],
    server: Any,
    pool: CallPool | None = None,
    streams: Mapping[str, CallPool] | None = None,
) -> None:
    """What ``add_to_server`` (a generated ``add_*Servicer_to_server``) registers, except
    that every request comes in as its bytes (the servicer parses them, so undecodable
    bytes are INVALID_ARGUMENT, not grpc's INTERNAL "Exception deserializing request!";
    Check recognises requests it has seen before by them), Check's and FilterRank's
    answers go out as the bytes the servicer encoded (no message built, parsed or
    serialized again), unary calls tell `pool` (the server's) when their request came,
    and each stream named in `streams` runs on its pool."""
    streams = streams or {}
    name_of_service, handlers = as_bytes(service, add_to_server)
    for name, h in handlers.items():
        if h.unary_unary is not None and pool is not None:
            h = h._replace(unary_unary=pool.arrived(h.unary_unary))
        if h.unary_stream is not None and name in streams:
            h = h._replace(unary_stream=on_pool(h.unary_stream, streams[name]))
        handlers[name] = h
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(name_of_service, handlers),)
    )
    server.add_registered_method_handlers(name_of_service, handlers)
