"""The servicers' synchronous methods as `grpc.aio` handlers (`grpc_runtime = "aio"`).

The servicers are written against the synchronous server's context, whose `abort`
raises; grpc.aio's is a coroutine. `SyncContext` gives a synchronous method what it
uses (metadata, peer, trailing metadata, code, details, `is_active`, an `abort` that
raises `Aborted`), and the wrappers here end the call with the status it carried.

A method runs either inline on the event loop (no thread hand-off: the point of this
runtime, for calls that only use the CPU, while no other thread holds the store) or
on a thread pool (calls that wait on a network store or the disk, cascades, admin
calls, each step of a Watch stream, and any call that comes while the store is
held), with the metadata and peer read on the loop first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from concurrent.futures import Executor, Future
from typing import Any

import grpc

from memlineage.grpc_api.registration import as_bytes


class Aborted(Exception):
    """What `SyncContext.abort` raises: the status the call ends with. An Exception, as
    the synchronous server's abort raises, so that code written for it reads alike."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, details)
        self.code, self.details = code, details


class SyncContext:
    """A synchronous servicer's view of a `grpc.aio` call. Trailing metadata is kept
    here and set on the call by the wrapper, on the loop."""

    __slots__ = ("_call", "_code", "_details", "_left", "_metadata", "_peer", "trailers")

    def __init__(self, call: grpc.aio.ServicerContext, *, snapshot: bool = False) -> None:
        self._call = call
        self._code: grpc.StatusCode | None = None
        self._details: str | None = None
        self.trailers: tuple[tuple[str, str], ...] = ()
        self._left = False  # the caller left (a stream's task was cancelled)
        # read on the loop when the method runs on another thread
        self._metadata = call.invocation_metadata() if snapshot else None
        self._peer = call.peer() if snapshot else None

    def invocation_metadata(self) -> Any:
        return self._metadata if self._metadata is not None else self._call.invocation_metadata()

    def peer(self) -> str:
        return self._peer if self._peer is not None else self._call.peer()

    def set_trailing_metadata(self, metadata: Sequence[tuple[str, str]]) -> None:
        self.trailers = tuple(metadata)

    def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        self._code, self._details = code, details
        raise Aborted(code, details)

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def details(self) -> str | None:
        return self._details

    def is_active(self) -> bool:
        return not self._left and not self._call.done()

    def leave(self) -> None:
        """The call ended on the loop: a method still running on a thread sees it."""
        self._left = True


async def end(call: grpc.aio.ServicerContext, context: SyncContext, aborted: Aborted) -> None:
    """End `call` with what the synchronous method aborted with (raises grpc's AbortError)."""
    await call.abort(aborted.code, aborted.details, context.trailers or ())


def served(
    behaviour: Callable[[Any, Any], Any], pool: Executor, busy: Callable[[], bool] | None
) -> Callable[..., Any]:
    """`behaviour` (sync unary-unary) run inline on the event loop, or on `pool` when
    `busy` is None (a method that may wait) or says the store is held by another
    thread now (the call would wait for it, and the loop with it)."""

    async def handler(request: Any, call: grpc.aio.ServicerContext) -> Any:
        on_loop = busy is not None and not busy()
        context = SyncContext(call, snapshot=not on_loop)
        try:
            if on_loop:
                response = behaviour(request, context)
            else:
                loop = asyncio.get_running_loop()
                response = await loop.run_in_executor(pool, behaviour, request, context)
        except Aborted as aborted:
            await end(call, context, aborted)
            return None  # not reached: `end` raises
        if context.trailers:
            call.set_trailing_metadata(context.trailers)
        return response

    return handler


_DONE = object()


def _step(items: Iterator[Any]) -> Any:
    return next(items, _DONE)


def streamed(behaviour: Callable[[Any, Any], Iterator[Any]], pool: Executor) -> Callable[..., Any]:
    """`behaviour` (a sync unary-stream generator) stepped on `pool`, one item a step.
    A stream the caller leaves is told so (`is_active` turns False) and closed once its
    current step returns, so its `finally` runs."""

    async def handler(request: Any, call: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        context = SyncContext(call, snapshot=True)
        items = behaviour(request, context)
        pending: Future[Any] | None = None  # the step on the pool (it ends when it returns)
        finished = False
        try:
            while True:
                pending = pool.submit(_step, items)
                item = await asyncio.wrap_future(pending)
                pending = None
                if item is _DONE:
                    finished = True
                    return
                yield item
        except Aborted as aborted:
            finished = True
            await end(call, context, aborted)
        finally:
            if not finished:
                context.leave()  # its step returns within the servicer's poll
                _close_later(items, pending)

    return handler


def _close_later(items: Iterator[Any], pending: Future[Any] | None) -> None:
    """Close `items` once the step `pending` has ended (a generator cannot be closed
    while it runs): on the thread that ran it, or at once when none runs (a queued
    step is cancelled with the call; its `finally` is a few lines)."""
    close = getattr(items, "close", None)
    if close is None:
        return
    if pending is None:
        close()
    else:
        pending.add_done_callback(lambda _: close())


def register(
    service: Any,
    add_to_server: Callable[[Any, Any], None],
    server: grpc.aio.Server,
    *,
    inline_methods: Collection[str],
    pool: Executor,
    stream_pool: Executor,
    busy: Callable[[], bool],
    interceptors: Sequence[grpc.ServerInterceptor] = (),
) -> None:
    """What ``add_to_server`` registers, on a grpc.aio server: requests in as bytes (the
    servicer parses them), Check's and FilterRank's answers out as the bytes it encoded
    (as `registration.register`), the unary methods named in `inline_methods` on the
    loop unless `busy()` (then on `pool`, as the others), streams stepped on
    `stream_pool`. `interceptors`:
    synchronous ones that wrap a unary handler (tracing's), applied to the synchronous
    method before it is made a coroutine."""
    service_name, handlers = as_bytes(service, add_to_server)
    for name, h in handlers.items():
        if h.unary_unary is not None:
            for interceptor in interceptors:
                method = f"/{service_name}/{name}"
                h = interceptor.intercept_service(lambda _d, h=h: h, _Details(method)) or h
            behaviour = h.unary_unary
            h = h._replace(
                unary_unary=served(behaviour, pool, busy if name in inline_methods else None)
            )
        elif h.unary_stream is not None:
            h = h._replace(unary_stream=streamed(h.unary_stream, stream_pool))
        else:
            raise TypeError(f"{service_name}.{name}: a handler kind this runtime does not serve")
        handlers[name] = h
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service_name, handlers),))


class _Details:
    """The call details an interceptor applied at registration reads: the method."""

    __slots__ = ("invocation_metadata", "method")

    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


__all__ = ["Aborted", "SyncContext", "end", "register", "served", "streamed"]
