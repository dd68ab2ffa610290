"""Serve an engine over gRPC: the MemLineage and PolicyAdmin services, health,
reflection, TLS, and a graceful shutdown.

The gRPC server is the synchronous one (a pool of worker threads, grown for calls
that never send their request: `call_pool.py`; Watch streams on a pool of their
own): in this Python it serves a unary call for markedly less
CPU than grpc.aio (bench/README.md). Health and reflection are registered apart
from the business services; on shutdown health flips to NOT_SERVING before the
server stops with a grace period. What is served is built elsewhere
(`memlineage.sidecar`, the composition root).
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2

from memlineage.config import Config
from memlineage.engine.core import Engine
from memlineage.grpc_api.admin_servicer import PolicyAdminService
from memlineage.grpc_api.auth import Authenticator
from memlineage.grpc_api.call_pool import CallPool
from memlineage.grpc_api.gate import AuthGate
from memlineage.grpc_api.listen_probe import listen_problem
from memlineage.grpc_api.servicer import MemLineageService, register
from memlineage.grpc_api.standard import NamedHealth, add_health, add_reflection
from memlineage.metrics import Metrics
from memlineage.oserrors import reason
from memlineage.v1 import memlineage_pb2 as pb

log = logging.getLogger("memlineage.server")

SERVICE_NAMES = (
    pb.DESCRIPTOR.services_by_name["MemLineage"].full_name,
    pb.DESCRIPTOR.services_by_name["PolicyAdmin"].full_name,
)
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# gRPC worker threads: the in-process store keeps them busy on the CPU, where more
# threads only contend for the GIL; a network store waits, so more calls overlap.
# Two on embedded: in `grpc_bench.py --rows workers` (two sidecars in alternating
# windows) fresh Checks ran 1.30-1.33x as fast as with four, FilterRank 1.00-1.05x;
# one and three were between (1.11x, 1.19x).
EMBEDDED_WORKERS = 2
NETWORK_STORE_WORKERS = 32


class TLSError(OSError):
    """The TLS certificate or key cannot be served: names the file and the problem."""


_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.S)
_PEM_KEY = re.compile(rb"-----BEGIN ((?:RSA |EC |DSA |ENCRYPTED )?PRIVATE KEY)-----")


MAX_PEM_BYTES = 1 << 20
"""A certificate chain or key file larger than this is refused (a mistyped path such
as /dev/urandom was read without end)."""


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise TLSError(f"TLS {what} {path}: cannot be read ({reason(exc)})") from exc
    if len(data) > MAX_PEM_BYTES:
        raise TLSError(f"TLS {what} {path}: is larger than 1 MiB: not a PEM {what} file")
    return data


def validity_problem(cert_path: str, now: float) -> str | None:
    """Why the first certificate of the chain is not valid at `now` (expired, or not
    yet valid), None when it is or cannot be told (the check uses CPython's decoder)."""
    decode = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is None:
        return None
    try:
        info = decode(cert_path)
        after = ssl.cert_time_to_seconds(info["notAfter"])
        before = ssl.cert_time_to_seconds(info["notBefore"])
    except (ssl.SSLError, OSError, KeyError, ValueError):
        return None
    if now > after:
        return f"expired on {info['notAfter']}"
    if now < before:
        return f"is not valid before {info['notBefore']}"
    return None


def tls_pair(cert_path: str, key_path: str) -> tuple[bytes, bytes]:
    """The (key, certificate chain) PEM bytes grpc serves, checked first with the
    `ssl` module so that a bad file is named with its problem (grpc itself only
    fails to bind): unreadable, not PEM, an encrypted key, a key that is not the
    certificate's."""
    cert, key = _read(cert_path, "certificate"), _read(key_path, "key")
    blocks = _PEM_CERT.findall(cert)
    if not blocks:
        raise TLSError(
            f"TLS certificate {cert_path}: is not a PEM certificate "
            "(no -----BEGIN CERTIFICATE----- block)"
        )
    try:
        ssl.create_default_context(cadata=b"\n".join(blocks).decode("ascii"))
    except (ssl.SSLError, ValueError) as exc:
        raise TLSError(
            f"TLS certificate {cert_path}: is not a valid PEM certificate ({_reason(exc)})"
        ) from exc
    found = _PEM_KEY.search(key)
    if found is None:
        raise TLSError(
            f"TLS key {key_path}: is not a PEM private key (no -----BEGIN PRIVATE KEY----- block)"
        )
    if found.group(1).startswith(b"ENCRYPTED") or b"Proc-Type: 4,ENCRYPTED" in key:
        raise TLSError(
            f"TLS key {key_path}: is encrypted; the sidecar needs an unencrypted private key"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_path, key_path, password=lambda: b"")
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise TLSError(
                f"TLS key {key_path}: does not match the certificate {cert_path}"
            ) from exc
        raise TLSError(
            f"TLS key {key_path}: cannot be used with the certificate {cert_path} ({_reason(exc)})"
        ) from exc
    problem = validity_problem(cert_path, time.time())
    if problem is not None:  # served (a renewal may be on its way), said at start
        log.warning(
            "TLS certificate %s %s: clients will refuse the handshake until it is renewed",
            cert_path,
            problem,
        )
    return key, cert


def _reason(exc: Exception) -> str:
    """An ssl error's reason without the `(_ssl.c:NNNN)` of where it was raised."""
    return re.sub(r"\s*\(_ssl\.c:\d+\)", "", str(exc.args[-1] if exc.args else exc))


@dataclass
class Served:
    """A started gRPC server and the services it runs."""

    server: Any  # grpc.Server
    port: int
    health: Any  # grpc_health.v1.health.HealthServicer
    service: MemLineageService
    pools: tuple[CallPool, ...] = ()  # health's and reflection's own threads
    calls: CallPool | None = None  # the server's pool for unary calls

    async def stop(self, grace: float) -> None:
        """Health to NOT_SERVING, open Watch streams told to end (within a poll, not at
        the grace), then the server stopped, waited for off the loop."""
        self.health.enter_graceful_shutdown()
        self.service.stopping.set()
        stopped: threading.Event = self.server.stop(grace)
        await asyncio.get_running_loop().run_in_executor(None, stopped.wait)

    def set_store_serving(self, serving: bool) -> None:
        """Health of what needs the store (the MemLineage service and the server as a
        whole, ""): SERVING or NOT_SERVING. PolicyAdmin keeps its own; ignored once
        shutting down."""
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", SERVICE_NAMES[0]):
            self.health.set(name, status)

    def close(self) -> None:
        self.service.close()
        for pool in self.pools:
            pool.shutdown(wait=False, cancel_futures=True)


def serve(
    engine: Engine, config: Config, metrics: Metrics, interceptors: Sequence[Any] = ()
) -> Served:
    """Register the services for `engine` and start listening on `config.listen`
    (raises OSError naming the address when it cannot). `interceptors`: tracing's,
    when on (`grpc_api/tracing.py`); none otherwise, so a call pays for nothing more."""
    auth = Authenticator(config.tokens)
    workers = config.grpc_workers or (
        NETWORK_STORE_WORKERS if engine.store.waits_on_network else EMBEDDED_WORKERS
    )
    pool = CallPool(workers)
    service = MemLineageService(engine, auth, metrics)
    # with tokens, the gate first: a caller without one never holds a worker
    gate = [AuthGate(auth, metrics, pool, service.watch_pool)] if auth.enabled else []
    server = grpc.server(
        pool,
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
            # clients ping while a Watch is open (client/retry.py, KEEPALIVE_SECONDS):
            # taken at any rate, never answered with GOAWAY "too_many_pings"
            ("grpc.http2.max_ping_strikes", 0),
        ],
        interceptors=gate + list(interceptors) or None,
    )
    register(service, server, pool)
    admin = PolicyAdminService(engine, auth, metrics)
    admin.sweep_batch = config.sweep_batch
    register(admin, server, pool)
    health_servicer = NamedHealth()
    pools = (
        *add_health(health_servicer, server),
        *add_reflection((*SERVICE_NAMES, health.SERVICE_NAME), server),
    )

    def close() -> None:
        service.close()
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)

    problem = listen_problem(config.listen)  # before gRPC logs its own C-core line
    if problem is not None:
        close()
        raise OSError(f"cannot listen on {config.listen}: {problem}")
    try:
        if config.tls_cert and config.tls_key:
            key, cert = tls_pair(config.tls_cert, config.tls_key)
            creds = grpc.ssl_server_credentials([(key, cert)])
            port = server.add_secure_port(config.listen, creds)
        else:
            port = server.add_insecure_port(config.listen)
    except TLSError:
        close()
        raise
    except RuntimeError as exc:  # the sync server raises where grpc.aio answered 0
        close()
        why = listen_problem(config.listen) or str(exc).split("; set GRPC_VERBOSITY")[0]
        raise OSError(f"cannot listen on {config.listen}: {why}") from exc
    if port == 0:
        close()
        why = listen_problem(config.listen) or "gRPC could not bind it"
        raise OSError(f"cannot listen on {config.listen}: {why}")
    server.start()
    watched = (pool, service.watch_pool, *pools)
    metrics.watch_pools(lambda: [(p.name, p.threads, p.held) for p in watched])
    for name in ("", *SERVICE_NAMES):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return Served(server, port, health_servicer, service, pools, pool)
