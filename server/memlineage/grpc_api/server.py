"""Build, start and stop the sidecar: gRPC services, health, reflection, metrics.

The gRPC server is the synchronous one (a pool of worker threads; Watch streams
on a pool of their own): in this Python it serves a unary call for markedly less
CPU than grpc.aio (bench/README.md). The asyncio loop of `run` keeps the
background work (access flushes, the governance sweep) and the signals. Health
and reflection are registered apart from the business services; on shutdown
health flips to NOT_SERVING before the server stops with a grace period; SIGHUP
reloads the policy directory (never half-applying a broken set).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TextIO

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from memlineage.config import Config
from memlineage.engine.core import Engine
from memlineage.engine.policies import PolicyHolder
from memlineage.engine.records import DecisionLog
from memlineage.grpc_api.auth import Authenticator
from memlineage.grpc_api.servicer import MemLineageService, PolicyAdminService, register
from memlineage.lineage.clock import Clock, system_clock
from memlineage.metrics import Metrics
from memlineage.store import open_store
from memlineage.store.base import LineageStore
from memlineage.v1 import memlineage_pb2 as pb
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc

log = logging.getLogger("memlineage.server")
SERVICE_NAMES = (
    pb.DESCRIPTOR.services_by_name["MemLineage"].full_name,
    pb.DESCRIPTOR.services_by_name["PolicyAdmin"].full_name,
)
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# gRPC worker threads: the in-process store keeps them busy on the CPU, where more
# threads only contend for the GIL; a network store waits, so more calls overlap.
EMBEDDED_WORKERS = 4
NETWORK_STORE_WORKERS = 32
ACCESS_FLUSH_SECONDS = 0.5


@dataclass
class Sidecar:
    server: grpc.Server
    port: int
    health: health.HealthServicer
    engine: Engine
    store: LineageStore
    metrics: Metrics
    service: MemLineageService
    log_file: TextIO | None = None
    background: asyncio.Task[None] | None = None
    flusher: asyncio.Task[None] | None = None

    async def stop(self, grace: float = 5.0) -> None:
        for task in (self.background, self.flusher):
            if task is not None:
                task.cancel()
        self.health.enter_graceful_shutdown()
        self.service.stopping.set()  # Watch streams end within a poll, not at the grace
        stopped = self.server.stop(grace)
        await asyncio.get_running_loop().run_in_executor(None, stopped.wait)
        try:
            self.engine.flush_access()
        except Exception:  # the store may be the reason we stop
            log.exception("final access flush failed")
        self.service.close()
        self.store.close()
        if self.log_file is not None:
            self.log_file.close()


def _log_sink(target: str) -> tuple[TextIO | None, TextIO | None]:
    """(sink, file to close): "-" stderr, "off" nothing, else a file appended to."""
    if target == "off":
        return None, None
    if target == "-":
        return sys.stderr, None
    fh = open(target, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed in stop()
    return fh, fh


async def start_sidecar(config: Config, *, clock: Clock = system_clock,
                        metrics: Metrics | None = None) -> Sidecar:
    holder = PolicyHolder(config.policy_dir)
    store = open_store(config.store_url(), clock=clock)
    sink, log_file = _log_sink(config.decision_log)
    engine = Engine(store, holder, clock=clock, log=DecisionLog(sink),
                    fail_mode=config.fail_mode, lineage_depth=config.lineage_depth,
                    record_access=config.record_access, scoring=config.scoring,
                    reuse_decisions=config.reuse_decisions)
    metrics = metrics or Metrics()
    metrics.watch_reuse(lambda: engine.reused)
    auth = Authenticator(config.tokens)
    workers = config.grpc_workers or (
        EMBEDDED_WORKERS if store.kind == "embedded" else NETWORK_STORE_WORKERS)
    server = grpc.server(
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memlineage-grpc"),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ])
    service = MemLineageService(engine, auth, metrics)
    register(service, server)
    admin = PolicyAdminService(engine, auth, metrics)
    admin.sweep_batch = config.sweep_batch
    pb_grpc.add_PolicyAdminServicer_to_server(admin, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    try:
        if config.tls_cert and config.tls_key:
            with open(config.tls_key, "rb") as k, open(config.tls_cert, "rb") as c:
                creds = grpc.ssl_server_credentials([(k.read(), c.read())])
            port = server.add_secure_port(config.listen, creds)
        else:
            port = server.add_insecure_port(config.listen)
    except RuntimeError as exc:  # the sync server raises where grpc.aio answered 0
        raise OSError(f"cannot listen on {config.listen}: {exc}") from exc
    if port == 0:
        raise OSError(f"cannot listen on {config.listen}")
    server.start()
    for name in ("", *SERVICE_NAMES):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    sidecar = Sidecar(server, port, health_servicer, engine, store, metrics, service,
                      log_file)
    if config.sweep_interval > 0:
        sidecar.background = asyncio.create_task(
            _sweep_forever(engine, config.sweep_interval, config.sweep_batch))
    sidecar.flusher = asyncio.create_task(
        _flush_forever(engine, ACCESS_FLUSH_SECONDS, config.compact_log_bytes))
    return sidecar


def _flush(engine: Engine, compact_log_bytes: int) -> None:
    engine.flush_access()
    maybe_compact = getattr(engine.store, "maybe_compact", None)  # embedded with a data dir
    if maybe_compact is not None and maybe_compact(compact_log_bytes):
        log.info("embedded store log compacted into a snapshot")


async def _flush_forever(engine: Engine, interval: float, compact_log_bytes: int) -> None:
    """Write buffered access statistics every `interval` seconds (off the loop), and
    keep the embedded store's log bounded by compacting it into a snapshot."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(interval)
        try:
            await loop.run_in_executor(None, _flush, engine, compact_log_bytes)
        except Exception:
            log.exception("access statistics flush failed; retried next interval")


async def _sweep_forever(engine: Engine, interval: float, batch: int) -> None:
    """The background governance sweep: a batch per namespace every `interval` s,
    on a worker thread so the loop's other tasks (flushes, signals) keep running."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(interval)
        try:
            report = await loop.run_in_executor(None, lambda: engine.sweep(batch=batch))
        except Exception:  # a failed pass is logged and retried next interval
            log.exception("governance sweep failed")
            continue
        if report.transitions or report.refused:
            log.info("sweep: examined %d, %d transitions, %d refused", report.examined,
                     len(report.transitions), len(report.refused))


async def run(config: Config, *, ready: TextIO | None = sys.stderr) -> None:
    """Serve until SIGTERM/SIGINT; SIGHUP reloads the policy directory."""
    sidecar = await start_sidecar(config)
    # Long-lived objects (compiled policies, caches) leave the young generations, and
    # collections run less often: the request path allocates many short-lived objects.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    if config.metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(config.metrics_port, addr="127.0.0.1",
                          registry=sidecar.metrics.registry)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def reload_policies() -> None:
        outcome = sidecar.engine.policies.reload()
        if outcome.applied:
            log.warning("SIGHUP: policies reloaded, version %s", outcome.version)
        else:
            log.error("SIGHUP: policy reload rejected, still serving %s:\n%s", outcome.version,
                      "\n".join(f"{d.location}: {d.message}" for d in outcome.diagnostics))

    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGHUP, reload_policies)
    host = config.listen.rpartition(":")[0]
    if ready is not None:
        serving = sidecar.engine.policies.current
        ready.write(f"memlineage serving on {host}:{sidecar.port} (store {sidecar.store.kind}, "
                    f"policies {serving.version}, {len(serving.compiled.policies)} rules)\n")
        ready.flush()
    await stop.wait()
    await sidecar.stop(config.grace_seconds)
