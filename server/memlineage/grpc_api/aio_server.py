"""Serve an engine on `grpc.aio` (`grpc_runtime = "aio"`), on the sidecar's event loop.

The same services as `server.serve` (MemLineage, PolicyAdmin, health, reflection,
TLS, the token gate, tracing, a graceful stop), with the servicers' synchronous
methods run inline on the loop where they only use the CPU (`aio_handlers`): no
hand-off to a worker thread per call, which is what the synchronous server pays
(bench/runtime_bench.py measures both). What waits runs on threads: every call on a
network store, cascades and erasures
(UpdateStatus, Revise, Object), the admin calls, each step of a Watch stream, and
any call that comes while another thread holds the store (`LineageStore.busy`: a
compaction of a large store holds it for seconds; health, on the loop, still
answers).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from memlineage.config import Config
from memlineage.engine.core import Engine
from memlineage.grpc_api import aio_handlers
from memlineage.grpc_api.admin_servicer import PolicyAdminService
from memlineage.grpc_api.auth import Authenticator
from memlineage.grpc_api.gate import AioAuthGate, AuthGate
from memlineage.grpc_api.listen_probe import listen_problem
from memlineage.grpc_api.registration import Caught
from memlineage.grpc_api.server import (
    EMBEDDED_WORKERS,
    MAX_MESSAGE_BYTES,
    NETWORK_STORE_WORKERS,
    SERVICE_NAMES,
    TLSError,
    tls_pair,
)
from memlineage.grpc_api.servicer import MemLineageService
from memlineage.grpc_api.standard import Undecodable, not_served, safe_parser
from memlineage.metrics import Metrics
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc

CPU_ONLY = ("Check", "FilterRank", "Explain", "Record", "Feedback", "RecordGrant")
"""MemLineage calls run on the loop on a store that does not wait on the network (the
embedded store's writes commit to SQLite without an fsync: `persistence.py`)."""


def inline_methods(waits_on_network: bool) -> tuple[str, ...]:
    """The MemLineage methods served on the loop for a store that waits so."""
    return () if waits_on_network else CPU_ONLY


class NamedHealth(health.aio.HealthServicer):
    """grpc's aio health service, whose NOT_FOUND names the services it knows (as
    `standard.NamedHealth` on the synchronous server)."""

    async def Check(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        served = sorted(self._server_status)
        if request.service not in served:
            await context.abort(grpc.StatusCode.NOT_FOUND, not_served(request.service, served))
        return await super().Check(request, context)


async def _refuse(request: Any, call: grpc.aio.ServicerContext) -> None:
    if isinstance(request, Undecodable):
        await call.abort(grpc.StatusCode.INVALID_ARGUMENT, request.problem)


def _guarded(h: grpc.RpcMethodHandler, name: str) -> Any:
    """`h` (an aio handler of health or reflection) with a request parser that never
    raises and a behaviour that answers INVALID_ARGUMENT for what did not parse."""
    parse = safe_parser(h.request_deserializer, name)
    if h.unary_unary is not None:
        unary = h.unary_unary

        async def one(request: Any, call: grpc.aio.ServicerContext) -> Any:
            await _refuse(request, call)
            return await unary(request, call)

        return h._replace(request_deserializer=parse, unary_unary=one)
    if h.unary_stream is not None:
        stream = h.unary_stream
        if inspect.isasyncgenfunction(stream):

            async def many(request: Any, call: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                await _refuse(request, call)
                async for item in stream(request, call):
                    yield item

            return h._replace(request_deserializer=parse, unary_stream=many)

        async def written(request: Any, call: grpc.aio.ServicerContext) -> None:
            await _refuse(request, call)  # health's Watch writes to the call itself
            await stream(request, call)

        return h._replace(request_deserializer=parse, unary_stream=written)
    if h.stream_stream is not None:
        both = h.stream_stream

        async def each(requests: Any, call: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async def checked() -> AsyncIterator[Any]:
                async for request in requests:
                    await _refuse(request, call)
                    yield request

            async for item in both(checked(), call):
                yield item

        return h._replace(request_deserializer=parse, stream_stream=each)
    raise TypeError(f"{name}: a handler kind this module does not guard")


def _add_guarded(caught: Caught, server: grpc.aio.Server) -> None:
    handlers = {
        method: _guarded(h, f"{caught.service}.{method} request")
        for method, h in caught.handlers.items()
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(caught.service, handlers),)
    )


def add_health(servicer: NamedHealth, server: grpc.aio.Server) -> None:
    caught = Caught()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, caught)
    _add_guarded(caught, server)


def add_reflection(names: tuple[str, ...], server: grpc.aio.Server) -> None:
    caught = Caught()
    names = (*names, reflection.SERVICE_NAME)
    caught_server: Any = caught  # the aio servicer, registered the generated way
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
        reflection.aio.ReflectionServicer(names), caught_server
    )
    _add_guarded(caught, server)


@dataclass
class AioServed:
    """A started grpc.aio server and what it runs (the twin of `server.Served`)."""

    server: grpc.aio.Server
    port: int
    health: NamedHealth
    service: MemLineageService
    pools: tuple[ThreadPoolExecutor, ...]
    loop: asyncio.AbstractEventLoop

    async def stop(self, grace: float) -> None:
        """Health to NOT_SERVING, Watch streams told to end, then the server stopped
        with `grace` seconds for the calls in flight."""
        await self.health.enter_graceful_shutdown()
        self.service.stopping.set()
        await self.server.stop(grace)

    def set_store_serving(self, serving: bool) -> None:
        """As `Served.set_store_serving`; from any thread (health lives on the loop)."""
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )

        async def apply() -> None:
            for name in ("", SERVICE_NAMES[0]):
                await self.health.set(name, status)

        asyncio.run_coroutine_threadsafe(apply(), self.loop)

    def close(self) -> None:
        self.service.close()
        for pool in self.pools:
            pool.shutdown(wait=False, cancel_futures=True)


async def serve_aio(
    engine: Engine, config: Config, metrics: Metrics, interceptors: Sequence[Any] = ()
) -> AioServed:
    """`server.serve` on grpc.aio, on the running loop (raises OSError naming the
    address when it cannot listen)."""
    auth = Authenticator(config.tokens)
    store = engine.store
    workers = config.grpc_workers or (
        NETWORK_STORE_WORKERS if store.waits_on_network else EMBEDDED_WORKERS
    )
    # named as the synchronous server's pools (the threads gauge's `pool` label)
    pool = ThreadPoolExecutor(workers, thread_name_prefix="memlineage-grpc")
    streams = ThreadPoolExecutor(
        MemLineageService.WATCH_THREADS, thread_name_prefix="memlineage-watch"
    )
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
            # clients ping while a Watch is open (client/retry.py, KEEPALIVE_SECONDS):
            # taken at any rate, never answered with GOAWAY "too_many_pings"
            ("grpc.http2.max_ping_strikes", 0),
        ],
        interceptors=[AioAuthGate(AuthGate(auth, metrics))] if auth.enabled else None,
    )
    service = MemLineageService(engine, auth, metrics)
    aio_handlers.register(
        service,
        pb_grpc.add_MemLineageServicer_to_server,
        server,
        inline_methods=inline_methods(store.waits_on_network),
        pool=pool,
        stream_pool=streams,
        busy=store.busy,
        interceptors=interceptors,
    )
    admin = PolicyAdminService(engine, auth, metrics)
    admin.sweep_batch = config.sweep_batch
    aio_handlers.register(
        admin,
        pb_grpc.add_PolicyAdminServicer_to_server,
        server,
        inline_methods=(),
        pool=pool,
        stream_pool=streams,
        busy=store.busy,
        interceptors=interceptors,
    )
    health_servicer = NamedHealth()
    add_health(health_servicer, server)
    add_reflection((*SERVICE_NAMES, health.SERVICE_NAME), server)
    served = AioServed(
        server, 0, health_servicer, service, (pool, streams), asyncio.get_running_loop()
    )
    problem = listen_problem(config.listen)  # before gRPC logs its own C-core line
    if problem is not None:
        served.close()
        raise OSError(f"cannot listen on {config.listen}: {problem}")
    try:
        if config.tls_cert and config.tls_key:
            key, cert = tls_pair(config.tls_cert, config.tls_key)
            port = server.add_secure_port(config.listen, grpc.ssl_server_credentials([(key, cert)]))
        else:
            port = server.add_insecure_port(config.listen)
    except TLSError:
        served.close()
        raise
    except RuntimeError as exc:
        served.close()
        why = listen_problem(config.listen) or str(exc).split("; set GRPC_VERBOSITY")[0]
        raise OSError(f"cannot listen on {config.listen}: {why}") from exc
    if port == 0:
        served.close()
        why = listen_problem(config.listen) or "gRPC could not bind it"
        raise OSError(f"cannot listen on {config.listen}: {why}")
    await server.start()
    served.port = port
    metrics.watch_pools(
        lambda: [
            ("memlineage-grpc", len(pool._threads), 0),
            ("memlineage-watch", len(streams._threads), 0),
        ]
    )
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return served


__all__ = ["AioServed", "NamedHealth", "inline_methods", "serve_aio"]
