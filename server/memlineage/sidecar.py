"""The composition root: open the store, build the engine, serve it, run the
background loops (access flushes, store maintenance, the governance sweep) and
the signals. Everything is wired here and handed down: the engine receives its
store and policies, the gRPC layer receives the engine (`grpc_api.server`)."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from memlineage import __version__
from memlineage.affinity import pin_process
from memlineage.config import Config, ConfigError
from memlineage.config.kinds import format_cpus, parse_cpus
from memlineage.engine.core import Engine
from memlineage.engine.fault_log import FaultLog
from memlineage.engine.policies import PolicyHolder, PolicyLoadError
from memlineage.engine.records import DecisionLog
from memlineage.grpc_api.aio_server import AioServed, serve_aio
from memlineage.grpc_api.server import Served, serve
from memlineage.grpc_api.servicer import MemLineageService, current_caller
from memlineage.lineage.clock import Clock, ManualClock, system_clock
from memlineage.lineage.errors import StoreUnavailableError
from memlineage.metrics import Metrics
from memlineage.oserrors import reason
from memlineage.store import open_store
from memlineage.store.base import LineageStore

if TYPE_CHECKING:
    from memlineage.grpc_api.tracing import Tracing

log = logging.getLogger("memlineage.server")
STORE_PING_SECONDS = 0.5
CASCADE_SECONDS = 30.0  # how often cascades left half-way are looked for (Redis)


@dataclass
class Sidecar:
    """A running sidecar: what was built, what serves it, what runs beside it."""

    engine: Engine
    store: LineageStore
    metrics: Metrics
    served: Served | AioServed
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    tracing: Tracing | None = None  # `tracing` on: flushed and ended by stop()

    @property
    def port(self) -> int:
        return self.served.port

    @property
    def service(self) -> MemLineageService:
        return self.served.service

    async def stop(self, grace: float = 5.0) -> None:
        for task in self.tasks:
            task.cancel()
        await self.served.stop(grace)
        try:
            self.engine.flush_access()
        except StoreUnavailableError as exc:  # a full disk, a store gone: no traceback
            log.error(
                "final access flush failed: the access statistics of %d memories read "
                "since the last flush are lost: %s",
                self.engine.access.pending(),
                exc,
            )
        except Exception:  # the store may be the reason we stop
            log.exception("final access flush failed")
        try:
            self.engine.flush_decisions()
        except StoreUnavailableError as exc:
            log.error(
                "final flush of kept decisions failed: %d decisions are not kept in the "
                "store (Explain and Feedback will not find them after the restart): %s",
                self.engine.decisions.pending(),
                exc,
            )
        except Exception:
            log.exception("final flush of kept decisions failed")
        self.served.close()
        self.store.close()
        self.engine.log.close()
        if self.tracing is not None:
            self.tracing.shutdown()  # the last spans exported


def sidecar_id(config: Config) -> str:
    """`sidecar_id`, or the host name: how logs and traces name this sidecar."""
    return config.sidecar_id or socket.gethostname()


def _decision_log(config: Config) -> DecisionLog:
    """`decision_log`: "-" stderr, "off" nothing, else a file appended to (its chain
    continued, rotated past `decision_log_max_bytes`, reopened on SIGHUP). Lines are
    labelled with the sidecar's id and version (docs/decision-log.schema.json)."""
    target, key = config.decision_log, config.decision_log_key
    labels = {"id": sidecar_id(config), "version": __version__}
    if target == "off":
        return DecisionLog(None)
    if target == "-":
        return DecisionLog(sys.stderr, key=key, labels=labels)
    try:
        return DecisionLog.open(
            target,
            key=key,
            max_bytes=config.decision_log_max_bytes,
            keep=config.decision_log_keep,
            labels=labels,
        )
    except OSError as exc:  # said as the setting it is (before: "[Errno 22] Invalid argument")
        raise OSError(
            f"decision_log {target}: cannot be opened to append to ({reason(exc)})"
        ) from exc


def _tracing(config: Config) -> Tracing | None:
    """`tracing`: None when off, and then nothing of OpenTelemetry is imported."""
    if config.tracing == "off":
        return None
    try:
        from memlineage.grpc_api.tracing import Tracing
    except ImportError as exc:
        raise ConfigError(
            f"tracing = {config.tracing!r} needs OpenTelemetry: "
            f"pip install -e '.[tracing]' (in the repository) ({exc})"
        ) from exc
    return Tracing.start(config.tracing, sidecar_id(config))


async def start_sidecar(
    config: Config, *, clock: Clock = system_clock, metrics: Metrics | None = None
) -> Sidecar:
    holder = PolicyHolder(config.policy_dir)  # a broken set fails before the store opens
    if config.simulation and not isinstance(clock, ManualClock):
        clock = ManualClock(clock())  # from now on it moves only with the requests' times
    # fsync is validated to come with an embedded store with a directory
    options: dict[str, Any] = {"fsync": True} if config.fsync else {}
    if config.redis_wait_replicas and not config.store_url().startswith("embedded"):
        options.update(
            wait_replicas=config.redis_wait_replicas, wait_timeout=config.redis_wait_timeout
        )
    store = open_store(
        config.store_url(),
        clock=clock,
        socket_timeout=config.redis_socket_timeout,
        connect_timeout=config.redis_connect_timeout,
        **options,
    )
    store.decision_retention = config.decision_retention
    try:
        decision_log = _decision_log(config)
    except BaseException:
        store.close()
        raise
    engine = Engine(
        store,
        holder,
        clock=clock,
        log=decision_log,
        fail_mode=config.fail_mode,
        lineage_depth=config.lineage_depth,
        record_access=config.record_access,
        max_future_seconds=config.max_future_seconds,
        simulation=config.simulation,
        scoring=config.scoring,
        reuse_decisions=config.reuse_decisions,
        keep_views=config.keep_views,
        capture_inputs=config.decision_log_inputs,
        shadow_dir=config.shadow_policy_dir,
    )
    if config.shadow_policy_dir:
        status, diagnostics = engine.shadow_load()
        if not status.active:
            store.close()
            raise PolicyLoadError([d for d in diagnostics if d.severity == "error"])
    metrics = metrics or Metrics()
    metrics.watch_reuse(lambda: engine.reused)

    def shadow_table() -> tuple[int, list[tuple[str, str, str, int]]]:
        status = engine.shadow.status()
        by_effects: Counter[tuple[str, str, str]] = Counter()
        for d in status.diffs:  # rows that differ in obligations only share their labels
            by_effects[(d.policy, d.serving, d.candidate)] += d.count
        return status.compared, [(*k, n) for k, n in by_effects.items()]

    metrics.watch_shadow(shadow_table)
    decision_log.requested_by = current_caller
    tracing = None
    try:
        tracing = _tracing(config)
        if tracing is not None:
            decision_log.trace_ids = tracing.current_ids
        interceptors = tracing.interceptors if tracing else ()
        served: Served | AioServed
        if config.grpc_runtime == "aio":
            served = await serve_aio(engine, config, metrics, interceptors)
        else:
            served = serve(engine, config, metrics, interceptors)
    except BaseException:
        store.close()
        decision_log.close()
        if tracing is not None:
            tracing.shutdown()
        raise
    sidecar = Sidecar(engine, store, metrics, served, tracing=tracing)
    # In a simulation the callers own time: a sweep runs when one asks (RunSweep).
    if config.sweep_interval > 0 and not config.simulation:
        sidecar.tasks.append(
            asyncio.create_task(_sweep_forever(engine, config.sweep_interval, config.sweep_batch))
        )
    sidecar.tasks.append(
        asyncio.create_task(
            _flush_forever(engine, config.access_flush_seconds, config.compact_log_bytes)
        )
    )
    sidecar.tasks.append(
        asyncio.create_task(_watch_serving(store, engine.log, served, STORE_PING_SECONDS))
    )
    sidecar.tasks.append(asyncio.create_task(_finish_cascades_forever(store, CASCADE_SECONDS)))
    return sidecar


async def _finish_cascades_forever(store: LineageStore, interval: float) -> None:
    """Finish the cascades a stopped sidecar (or a Redis gone mid-walk) left half-way:
    at start every one noted (another sidecar's walk in progress is walked twice,
    harmlessly: marking is idempotent), then every `interval` s those noted at least
    that long ago. A failed round is logged and retried."""
    loop = asyncio.get_running_loop()
    min_age = 0.0
    while True:
        try:
            await loop.run_in_executor(None, store.finish_cascades, min_age)
        except StoreUnavailableError as exc:
            log.warning("finishing stopped cascades failed, retried in %g s: %s", interval, exc)
        except Exception:
            log.exception("finishing stopped cascades failed; retried in %g s", interval)
        min_age = interval
        await asyncio.sleep(interval)


def flush(engine: Engine, compact_log_bytes: int) -> int:
    """Write buffered access statistics and the decisions queued for the store, then
    let the store do its upkeep (the embedded store folds its op log into a snapshot
    past `compact_log_bytes`). Returns how many items the store took (0: it was not
    asked anything, so the round says nothing of whether it answers)."""
    written = 0
    try:
        written += engine.flush_access()
    finally:
        written += engine.flush_decisions()
    if engine.store.maybe_compact(compact_log_bytes):
        log.info("embedded store: op log folded into a snapshot in SQLite")
    return written


async def _flush_forever(engine: Engine, interval: float, compact_log_bytes: int) -> None:
    """`flush` every `interval` seconds, off the loop. A store that does not answer
    fails every round while it is down (the kept decisions are retried each time):
    said once, then once a minute, and once when a round writes to the store again
    (a round with nothing to write proves nothing: while the store is down what failed
    stays queued, so the first round after it writes); any other failure with its
    traceback, every time."""
    loop = asyncio.get_running_loop()
    faults = FaultLog(log)
    while True:
        await asyncio.sleep(interval)
        try:
            if not await loop.run_in_executor(None, flush, engine, compact_log_bytes):
                continue
        except StoreUnavailableError as exc:
            message = f"background flush failed, retried next interval: {exc}"
            faults.failed("flush", str(exc), message)
            continue
        except Exception:
            log.exception("background flush failed; retried next interval")
            continue
        faults.cleared("flush", "background flush goes through again")


async def _watch_serving(
    store: LineageStore, decisions: DecisionLog, served: Served | AioServed, interval: float
) -> None:
    """Every `interval` s, on a thread of its own: ping the store (a ping waits at most
    the client's timeouts) and, while the decision log refuses writes, probe it
    (`DecisionLog.writable`). The services that decide are NOT_SERVING while the store
    does not answer or the log refuses (every decision would be UNAVAILABLE), SERVING
    once both work again: the health check itself only reads the status, it never
    waits on the store or the disk."""
    loop = asyncio.get_running_loop()
    pinger = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlineage-ping")
    store_ok = log_ok = True
    try:
        while True:
            await asyncio.sleep(interval)
            try:
                pinged = await loop.run_in_executor(pinger, store.ping)
            except Exception:  # a ping never raises; a closed store may
                pinged = False
            logged = True
            if decisions.refusing:
                logged = await loop.run_in_executor(pinger, decisions.writable)
            if (pinged, logged) == (store_ok, log_ok):
                continue
            if pinged != store_ok:
                log.log(
                    logging.WARNING if pinged else logging.ERROR,
                    "lineage store %s",
                    "answers again" if pinged else "does not answer",
                )
            if logged != log_ok:
                log.log(
                    logging.WARNING if logged else logging.ERROR,
                    "decision log %s",
                    "takes lines again" if logged else "refuses writes",
                )
            if (pinged and logged) != (store_ok and log_ok):
                served.set_store_serving(pinged and logged)
                log.log(
                    logging.WARNING if pinged and logged else logging.ERROR,
                    "health %s",
                    "SERVING" if pinged and logged else "NOT_SERVING",
                )
            store_ok, log_ok = pinged, logged
    finally:
        pinger.shutdown(wait=False)


async def _sweep_forever(engine: Engine, interval: float, batch: int) -> None:
    """The background governance sweep: a batch per namespace every `interval` s,
    on a worker thread so the loop's other tasks (flushes, signals) keep running."""
    loop = asyncio.get_running_loop()
    faults = FaultLog(log)  # a store refusing writes (a full disk): said once, not per pass
    while True:
        await asyncio.sleep(interval)
        try:
            report = await loop.run_in_executor(None, lambda: engine.sweep(batch=batch))
        except StoreUnavailableError as exc:
            faults.failed(
                "sweep", str(exc), f"governance sweep failed, retried next interval: {exc}"
            )
            continue
        except Exception:  # a failed pass is logged and retried next interval
            log.exception("governance sweep failed")
            continue
        faults.cleared("sweep", "governance sweep goes through again")
        if report.transitions or report.refused or report.unreadable:
            log.info(
                "sweep: examined %d, %d transitions, %d refused, %d unreadable",
                report.examined,
                len(report.transitions),
                len(report.refused),
                len(report.unreadable),
            )


def settle_heap() -> None:
    """Once the server is built: its long-lived objects (compiled policies, caches)
    leave the young generations, and collections run less often, as the request path
    allocates many short-lived objects (benches call it to time what serving runs)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


async def run(config: Config, *, ready: TextIO | None = sys.stderr) -> None:
    """Serve until SIGTERM/SIGINT; SIGHUP reopens the decision log file (logrotate)
    and reloads the policy directory when it changed since it was last loaded."""
    cpus = parse_cpus(config.cpu_affinity)
    if cpus:  # before the server's threads start: they inherit the mask
        pin_process(cpus)
    sidecar = await start_sidecar(config)
    settle_heap()
    metrics_at = ""
    if config.metrics_port is not None:
        from prometheus_client import start_http_server

        try:
            httpd, _ = start_http_server(
                config.metrics_port, addr=config.metrics_host, registry=sidecar.metrics.registry
            )
            # the port bound (metrics_port 0: one the system chose), said on the ready line
            metrics_at = f", metrics on {config.metrics_host}:{httpd.server_port}"
        except OSError as exc:  # said as the setting it is (before: "[Errno 98] ...")
            await sidecar.stop(0)
            raise OSError(
                f"cannot serve metrics on {config.metrics_host}:{config.metrics_port} "
                f"(metrics_host, metrics_port): {reason(exc)}"
            ) from exc
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def reload_policies() -> None:
        sidecar.engine.log.reopen()  # after logrotate moved it: the chain goes on
        outcome = sidecar.engine.policies.reload(if_changed=True)
        if outcome.applied:
            log.warning("SIGHUP: policies reloaded, version %s", outcome.version)
        elif outcome.unchanged:
            log.warning(
                "SIGHUP: the policy directory is as it was last loaded; still serving %s "
                "(promoted or sent as files: write it to the directory to keep it over a "
                "restart)",
                outcome.version,
            )
        else:
            log.error(
                "SIGHUP: policy reload rejected, still serving %s:\n%s",
                outcome.version,
                "\n".join(f"{d.location}: {d.message}" for d in outcome.diagnostics),
            )

    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGHUP, reload_policies)
    host = config.listen.rpartition(":")[0]
    if ready is not None:
        serving = sidecar.engine.policies.current
        ready.write(
            f"memlineage serving on {host}:{sidecar.port} (store {sidecar.store.kind}, "
            f"writes survive {sidecar.store.durability()}, "
            f"policies {serving.version}, {len(serving.compiled.policies)} rules"
            + (", simulated clock: requests' times move it" if config.simulation else "")
            + (f", on CPUs {format_cpus(cpus)}" if cpus else "")
            + metrics_at
            + ")\n"
        )
        ready.flush()
    await stop.wait()
    await sidecar.stop(config.grace_seconds)
