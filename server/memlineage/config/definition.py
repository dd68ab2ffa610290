"""`Config`: the one definition of every setting (each field's type, default and
metadata: section, help, environment variable, flag)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from memlineage.config.kinds import (
    FAIL_MODES,
    GRPC_RUNTIMES,
    ConfigError,
    Range,
    T,
    TokenGrant,
    check_tokens,
    parse_cpus,
)
from memlineage.scoring.config import ScoringConfig

# ------------------------------------------------------------------ the definition


@dataclass(frozen=True, slots=True)
class _Meta:
    help: str
    section: str
    flag: str = ""  # default: --NAME-WITH-DASHES
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    secret: bool = False  # never shown by `config show`; flag help warns about ps
    range: Range | None = None  # a numeric setting's values (checked on every route)


_META = "memlineage.setting"
_TABLE_META = "memlineage.settings-table"


def _setting(
    default: T,
    help: str,
    section: str,
    *,
    flag: str = "",
    aliases: tuple[str, ...] = (),
    choices: tuple[str, ...] = (),
    secret: bool = False,
    range: Range | None = None,
) -> T:
    """A Config field that is a setting (its metadata is everything but type and default)."""
    meta = _Meta(help, section, flag, aliases, choices, secret, range)
    return field(default=default, repr=not secret, metadata={_META: meta})


def _setting_factory(
    factory: Callable[[], T], help: str, section: str, *, secret: bool = False
) -> T:
    meta = _Meta(help, section, secret=secret)
    return field(default_factory=factory, repr=not secret, metadata={_META: meta})


@dataclass(frozen=True)
class Config:
    listen: str = _setting(
        "127.0.0.1:50051", "HOST:PORT the gRPC server listens on (port 0: any free one)", "serving"
    )
    grpc_workers: int = _setting(
        0,
        "gRPC worker threads for unary calls, 0 to 1024; 0: automatic, 2 on embedded (CPU-bound), "
        "32 on Redis (waits on the network). Watch streams have a pool of their own. On "
        "grpc_runtime aio: the threads of the calls that wait (cascades, admin, Redis)",
        "serving",
        range=Range(0, 1024),
    )
    grpc_runtime: str = _setting(
        "sync",
        "the gRPC server: `sync` (grpcio's threaded server) or `aio` (grpc.aio: calls that "
        "only use the CPU answered on the event loop, no thread hand-off; what waits on "
        "threads); bench/runtime_bench.py measures both",
        "serving",
        choices=GRPC_RUNTIMES,
    )
    cpu_affinity: str = _setting(
        "",
        "the CPUs `memlineage serve` runs on, a list as `taskset -c` writes it (`1`, `0,2`, "
        "`2-3`); empty: wherever the OS puts it. One CPU of its own keeps a sidecar's caches "
        "warm beside a busy agent (README, Performance)",
        "serving",
    )
    grace_seconds: float = _setting(
        5.0,
        "on SIGTERM, seconds in-flight calls get before the server stops, 0 to 3600",
        "serving",
        range=Range(0, 3600),
    )
    tls_cert: str | None = _setting(
        None, "PEM certificate chain file; with tls_key, the server speaks TLS", "serving"
    )
    tls_key: str | None = _setting(None, "PEM private key file of tls_cert", "serving")
    sidecar_id: str = _setting(
        "",
        "this sidecar's name in decision-log `labels.id` and the trace resource's "
        "`service.instance.id`; empty: the host name",
        "serving",
    )
    tokens: tuple[TokenGrant, ...] = _setting_factory(
        tuple,
        "bearer tokens and the namespaces each may use (docs/configuration.md, Tokens); none: one "
        "namespace `default`, admin RPCs from loopback only",
        "auth",
        secret=True,
    )
    store: str = _setting(
        "embedded",
        "the lineage store: `embedded` (in memory), `embedded:///DIR`, `redis://HOST:PORT/DB`, "
        "`redis+cluster://H1:P1,H2:P2`",
        "store",
    )
    data_dir: str | None = _setting(
        None,
        "with store `embedded`: persist in this directory (shorthand for `embedded:///DIR`)",
        "store",
    )
    fsync: bool = _setting(
        False,
        "embedded store with a data directory: fsync at every commit (SQLite "
        "synchronous=FULL), so an acknowledged write survives a power loss or an OS crash "
        "too, not only a killed process; one fsync per write",
        "store",
    )
    redis_socket_timeout: float = _setting(
        1.0,
        "Redis: seconds to wait for a reply, in (0, 60]; a store that does not answer in time "
        "is UNAVAILABLE (keep it well under the clients' deadlines, 5 s)",
        "store",
        range=Range(0, 60, lo_open=True),
    )
    redis_connect_timeout: float = _setting(
        1.0,
        "Redis: seconds to wait for a connection, in (0, 60]",
        "store",
        range=Range(0, 60, lo_open=True),
    )
    redis_wait_replicas: int = _setting(
        0,
        "Redis: replicas that must acknowledge each lineage write and grant use (`WAIT`) "
        "before it is answered, 0 to 16; 0: the master's apply is enough, and a failover "
        "can lose the last writes acknowledged (Redis replicates asynchronously; "
        "docs/operating.md). The embedded store has no replicas and ignores it",
        "store",
        range=Range(0, 16),
    )
    redis_wait_timeout: float = _setting(
        0.5,
        "Redis, with `redis_wait_replicas`: seconds to wait for the replicas, in (0, 60] "
        "and below `redis_socket_timeout`; fewer in time: the call is UNAVAILABLE (the "
        "write stays on the master: retry it)",
        "store",
        range=Range(0, 60, lo_open=True),
    )
    compact_log_bytes: int = _setting(
        16 * 1024 * 1024,
        "embedded data dir: fold the op log into a snapshot once this many bytes of ops were "
        "written since the last one (bounds the replay at start), 1 to 2**40",
        "store",
        range=Range(1, 2**40),
    )
    policy_dir: str = _setting(
        "policies",
        "directory of `.mlp` policies, loaded at start, on ReloadPolicies and on SIGHUP "
        "(when it changed since it was last loaded)",
        "policies",
        flag="--policies",
        aliases=("--policy-dir",),
    )
    fail_mode: str = _setting(
        "closed",
        "when the store is unavailable: `closed` answers UNAVAILABLE; `degraded` answers "
        "Check and FilterRank without it (reads DEGRADE, act, update, delete and derive "
        "DENY) and every other RPC that needs it UNAVAILABLE",
        "policies",
        choices=FAIL_MODES,
    )
    lineage_depth: int = _setting(
        16,
        "ancestors and descendants loaded per decision, 1 to 64 (the deepest walk a store "
        "makes); a policy walk needing more fails its rule closed (DENY, naming this setting)",
        "policies",
        range=Range(1, 64),
    )
    shadow_policy_dir: str | None = _setting(
        None,
        "a candidate policy directory decided beside the serving one from the start (never "
        "changing an answer); `memlineage shadow status|promote|drop`",
        "policies",
    )
    reuse_decisions: bool = _setting(
        True,
        "answer a repeated Check from the decision it got, until a write to its namespace "
        "(by any sidecar) or a time threshold its policies test",
        "policies",
    )
    keep_views: bool = _setting(
        True,
        "embedded store: keep each memory's lineage view (and its scores, when no record "
        "decays) between decisions while nothing it holds changes; decisions are still "
        "taken every time",
        "policies",
    )
    decision_log: str = _setting(
        "-",
        "where decisions are logged, one hash-chained JSON line each: `-` stderr, `off`, or a "
        "file (`memlineage log verify` checks the chain)",
        "decisions",
    )
    decision_log_inputs: bool = _setting(
        False,
        "each decision-log line carries what its decision read (`input`: the request, the "
        "lineage facts, the counts) so `memlineage replay` can re-decide it; larger lines",
        "decisions",
    )
    decision_log_key: str | None = _setting(
        None,
        "HMAC-SHA-256 key of the log's hash chain (unset: plain SHA-256, which anyone can "
        "recompute); best given in the environment",
        "decisions",
        secret=True,
    )
    decision_log_max_bytes: int = _setting(
        0,
        "a file log rotates to FILE.1 (older ones shift) past this size; 0: never "
        "(logrotate: rename, then SIGHUP)",
        "decisions",
        range=Range(0, 2**50),
    )
    decision_log_keep: int = _setting(
        5,
        "rotated log files kept, FILE.1 (newest) to FILE.N; 1 to 1000",
        "decisions",
        range=Range(1, 1000),
    )
    decision_retention: int = _setting(
        10_000,
        "decisions kept per namespace for Explain and Feedback: by the store, for any sidecar "
        "and after a restart (Redis, an embedded data dir), and in the process (at most "
        "100000 a namespace, 200000 in all: past that the namespaces holding the most "
        "keep only their newest); 1 to 10000000",
        "decisions",
        range=Range(1, 10_000_000),
    )
    record_access: bool = _setting(
        True, "count reads (last access, access count), which the value score uses", "access"
    )
    access_flush_seconds: float = _setting(
        2.0,
        "reads are summed in memory and written this often, 0.01 to 3600: each flush changes "
        "the rows read since, so less often is cheaper; statistics are at most this late "
        "(Explain and the sweep flush first)",
        "access",
        range=Range(0.01, 3600),
    )
    metrics_port: int | None = _setting(
        None,
        "serve Prometheus metrics on metrics_host:PORT (unset: no endpoint; 0: a free port, "
        "named on the ready line)",
        "metrics",
        range=Range(0, 65535),
    )
    metrics_host: str = _setting(
        "127.0.0.1",
        "the address the metrics endpoint listens on: 0.0.0.0 (or the pod's address) for a "
        "Prometheus that scrapes from outside; the default keeps it on loopback",
        "metrics",
    )
    tracing: str = _setting(
        "off",
        "OpenTelemetry spans, one per unary RPC (`pip install -e '.[tracing]'` in the "
        "repository): `off`, "
        "`console` (JSON lines to stderr), `file:PATH` (JSON lines appended), or an OTLP/HTTP "
        "endpoint `http(s)://HOST:4318/v1/traces`; OTEL_* variables (sampler, service name, "
        "headers) apply",
        "tracing",
    )
    sweep_interval: float = _setting(
        60.0,
        "seconds between background governance sweep passes, 0 to 604800 (a week); 0: off",
        "lifecycle",
        range=Range(0, 7 * 86400),
    )
    sweep_batch: int = _setting(
        1000,
        "memories examined per namespace per pass, 1 to 1000000",
        "lifecycle",
        range=Range(1, 1_000_000),
    )
    max_future_seconds: float = _setting(
        300.0,
        "how far ahead of the server's clock a request's `time` may be, 0 to 86400 s (a later "
        "one is INVALID_ARGUMENT `time`); earlier times are allowed",
        "time",
        range=Range(0, 86_400),
    )
    simulation: bool = _setting(
        False,
        "run on a simulated clock the callers advance: a request's `time` moves it forward "
        "(never back: an earlier one is INVALID_ARGUMENT), max_future_seconds does not apply, "
        "the background sweep is off; embedded store only (docs/simulation.md)",
        "time",
    )
    scoring: ScoringConfig = field(
        default_factory=ScoringConfig, metadata={_TABLE_META: ScoringConfig}
    )

    def store_url(self) -> str:
        if self.data_dir and self.store == "embedded":
            try:
                where = str(Path(self.data_dir).resolve())
            except RuntimeError:  # a symlink loop (Python < 3.13): the open names it
                where = os.path.abspath(self.data_dir)  # before: a RuntimeError traceback
            return f"embedded://{where}"
        return self.store

    def validated(self) -> Config:
        for f in fields(self):  # each numeric setting's declared range
            meta: _Meta | None = f.metadata.get(_META)
            problem = meta.range.problem(getattr(self, f.name)) if meta and meta.range else None
            if problem is not None:
                raise ConfigError(f"{f.name} {problem}", f.name)
        try:
            check_tokens(self.tokens)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.grpc_runtime not in GRPC_RUNTIMES:
            raise ConfigError(
                f"grpc_runtime must be one of {GRPC_RUNTIMES}, got {self.grpc_runtime!r}",
                "grpc_runtime",
            )
        if self.fail_mode not in FAIL_MODES:
            raise ConfigError(
                f"fail_mode must be one of {FAIL_MODES}, got {self.fail_mode!r}", "fail_mode"
            )
        parse_cpus(self.cpu_affinity)  # raises ConfigError naming the setting
        host, sep, port = self.listen.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"listen must be HOST:PORT, got {self.listen!r}", "listen")
        if int(port) > 65535:  # gRPC would take it modulo 65536: another port
            raise ConfigError(f"listen port must be 0 to 65535, got {port}", "listen")
        if not self.metrics_host or any(c.isspace() for c in self.metrics_host):
            raise ConfigError(
                f"metrics_host must be an address, got {self.metrics_host!r}", "metrics_host"
            )
        if not re.match(r"(embedded(://.+)?|rediss?://.+|redis\+cluster://.+)$", self.store):
            raise ConfigError(
                f"store must be embedded, embedded:///dir, redis://host:port/db or "
                f"redis+cluster://h1:p1,h2:p2, got {self.store!r}",
                "store",
            )
        try:
            self.scoring.check()
        except ValueError as exc:
            raise ConfigError(f"scoring: {exc}") from None
        if self.redis_wait_replicas and self.redis_wait_timeout >= self.redis_socket_timeout:
            raise ConfigError(
                f"redis_wait_timeout ({self.redis_wait_timeout:g} s) must be below "
                f"redis_socket_timeout ({self.redis_socket_timeout:g} s): the WAIT is a "
                "reply the store waits for"
            )
        if self.fsync and not self.store_url().startswith("embedded://"):
            raise ConfigError(
                "fsync applies to the embedded store with a data directory (data_dir, or "
                f"store = embedded:///DIR), got store {self.store_url()!r}"
            )
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("tls_cert and tls_key go together")
        if not (
            self.tracing in ("off", "console")
            or (self.tracing.startswith("file:") and len(self.tracing) > 5)
            or re.match(r"https?://[^/\s]+", self.tracing)
        ):
            raise ConfigError(
                "tracing must be off, console, file:PATH or an http(s):// OTLP endpoint, "
                f"got {self.tracing!r}",
                "tracing",
            )
        if self.simulation and not self.store_url().startswith("embedded"):
            raise ConfigError(
                "simulation needs the embedded store: sidecars sharing a Redis run on wall time"
            )
        return self
