"""gRPC end-to-end benchmark on loopback: prints figures, asserts nothing (not a test).

One run, one client (grpc.aio stubs, N coroutines in flight on one channel, in
this process), the same concurrency, warm-up and duration for every row:

- two ceilings, each in its own process, returning a constant, realistic
  ``CheckResponse`` (and, for FilterRank, a constant response with 100 ranked
  candidates) without looking at the request: a bare ``grpc.aio`` servicer and
  a bare synchronous ``grpc.server`` (the stack the sidecar serves on: "same
  stack");
- the sidecar (``python -m memlineage serve``, its own process, bundled
  ``policies/``, decision log off) on the embedded store and on Redis (a
  throwaway ``redis-server`` on a free port, no persistence), in rows:

  * headline, what users have: ``Check`` with every decision fresh (a sidecar
    started with ``reuse_decisions = false`` from a TOML ``--config``);
    ``Check`` in a mix where 1 call in 20 records a new memory into the same
    namespace (reuse on; every write ends the namespace's reusable decisions);
    ``FilterRank`` x100 fresh (decisions/s = calls/s x 100); and, on embedded,
    p50/p99 with ONE call in flight (sidecar fresh vs both ceilings);
  * best case: repeated requests, no writes: ``Check`` and ``FilterRank`` on a
    request list cycled over and over with nothing written, so decision reuse
    and the Check memo answer almost everything;
  * ``Check`` best case on embedded with the decision log written to a file.

Each sidecar is first loaded through ``Record`` with ~2,000 memories (users,
tools, reasoning, small dependency DAGs, stale ``flight_price`` quotes, expired
tool results, untrusted and blocked sources, some roots revoked with their
descendants cascaded to pending verification).  Besides requests/s, p50/p99,
decisions/s and the ratios to both ceilings, each row has the CPU time per call
of the server process(es) and of the client (from /proc, over the measured
window), steadier than throughput on a shared machine.  Target lines at the end.

    .venv/bin/python bench/grpc_bench.py                        # ~3 min
    .venv/bin/python bench/grpc_bench.py --rows fresh --backends embedded --rounds 0
    .venv/bin/python bench/grpc_bench.py --duration 3 --concurrency 64
    .venv/bin/python bench/grpc_bench.py --backends embedded --profile /tmp/prof

``--rows`` picks a subset (see ``--help``).  ``--profile DIR`` samples every
sidecar with py-spy (``pip install py-spy``) during each measured window, writes
the collapsed stacks to DIR and prints the top functions (own time and
inclusive time); it perturbs the figures, so take throughput from a run without it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from memlineage.v1 import memlineage_pb2 as pb  # noqa: E402
from memlineage.v1 import memlineage_pb2_grpc as pb_grpc  # noqa: E402

POLICIES = REPO / "policies"
FR_CANDIDATES = 100
TARGET_CHECK_RATIO = 0.85  # best case (repeated requests), against the aio ceiling
TARGET_FRESH_RATIO = 0.60  # fresh Check, against the same-stack (bare sync) ceiling
TARGET_MIX_RATIO = 0.60  # 5%-write mix calls/s, against the bare sync ceiling's Check
TARGET_P50_FACTOR = 1.2  # fresh Check p50 at one call in flight / bare sync p50
TARGET_FR_DECISIONS = 50_000  # FilterRank decisions/s (fresh; best case too)
WRITE_EVERY = 20  # the mix: one Record of a new memory per 19 Checks (5% of calls)
REUSE_OFF_TOML = "# grpc_bench: every decision fresh\nreuse_decisions = false\n"
TARGET_SHADOW_SLOWDOWN = 0.15  # fresh Check with a shadow candidate loaded, at most
# The shadow row's candidate: the bundled set plus this rule, which denies what the
# bundled set degrades for a tool of the workload (`memories`: kind 5) that no bundled
# test names, so the candidate's tests pass (a candidate whose tests fail is not loaded;
# `tests/test_bench_smoke.py` loads this one) and it disagrees on a share of reads.
SHADOW_RULE = (
    "policy no_browser_at_all priority 99 {\n  on read\n  when memory.creator.id == "
    '"tool:browser"\n  deny "no browser output"\n}\n'
)

# Row labels (the table's first column; target lines find rows by them).
AIO = "ceiling (bare aio)"
SYNC = "ceiling (bare sync)"
BEST = "sidecar, best case: repeated requests, no writes"
BEST_LOG = "sidecar + decision log, best case"
FRESH = "sidecar, every decision fresh (reuse off)"
SHADOW = "sidecar, every decision fresh, a shadow candidate loaded"
COLD = "sidecar, every decision fresh, no kept views"
OTHER_WORKERS = "sidecar, every decision fresh, grpc_workers = {}"
STACK = "sidecar's server, Check a spin of {:.0f} us"
MIX = "sidecar, 5% Record mix (reuse on)"

# --rows: names and groups.
ROWS = (
    "fresh-check",
    "fresh-fr",
    "latency",
    "mix",
    "best-check",
    "best-fr",
    "log",
    "shadow",
    "views",
    "workers",
    "stack",
)
ROW_GROUPS = {
    "all": ROWS,
    "headline": ("fresh-check", "fresh-fr", "latency", "mix"),
    "fresh": ("fresh-check", "fresh-fr", "latency", "views"),
    "best": ("best-check", "best-fr"),
}
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


# ------------------------------------------------------------------ the ceiling server
def _ts(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.seconds = int(seconds)
    ts.nanos = int((seconds - int(seconds)) * 1e9)
    return ts


def constant_decision(memory_id: str = "m:t0:000123") -> pb.Decision:
    """What the sidecar answers for a stale flight price: same fields, same sizes."""
    return pb.Decision(
        decision_id="d19b2c3d4e5f-8a1b2c3d-1f2e3",
        effect=pb.EFFECT_DEGRADE,
        compliance_score=0.8,
        expected_cost=0.02,
        obligations=[
            pb.Obligation(kind="refresh", source="tool:flight_api", policy="freshest_flight_price")
        ],
        reasons=[
            pb.Reason(
                policy="freshest_flight_price",
                effect=pb.EFFECT_DEGRADE,
                message="always use the freshest flight price",
                priority=10,
                status="fired",
            )
        ],
        operation=pb.OPERATION_READ,
        memory_ids=[memory_id],
        decided_at=_ts(time.time()),
        policy_version="sha256:3f9a1c2b7d4e",
    )


class CeilingServicer(pb_grpc.MemLineageServicer):
    """Answers Check / FilterRank with prebuilt messages: gRPC + protobuf and nothing else.
    ``spin_us`` > 0 (calibration rows): Check first runs that many microseconds of
    Python, to show what per-call handler time a given fraction of the ceiling allows."""

    def __init__(self, spin_us: float = 0.0) -> None:
        self.spin = spin_us * 1e-6
        self.check = pb.CheckResponse(decision=constant_decision())
        self.filter_rank = pb.FilterRankResponse()
        for i in range(FR_CANDIDATES):
            mid = f"m:t0:{i:06d}"
            c = self.filter_rank.candidates.add(
                memory_id=mid, similarity=0.5, rank_score=0.4, kept=True
            )
            c.decision.CopyFrom(constant_decision(mid))
            self.filter_rank.ranked_ids.append(mid)

    async def Check(self, request, context):
        if self.spin:
            end = time.perf_counter() + self.spin
            while time.perf_counter() < end:
                pass
        return self.check

    async def FilterRank(self, request, context):
        return self.filter_rank


CPUS_ENV = "MEMLINEAGE_CPU_AFFINITY"  # the sidecar's own setting, read by the ceilings too


def pin_servers(cpus: str) -> str:
    """``--server-cpus``: every server this bench starts runs on `cpus` (a sidecar by
    its own ``cpu_affinity`` setting, which it reads from the environment; a ceiling
    pins itself from the same variable), this process on the other CPUs. The line that
    says so."""
    # imported here: instructions_bench.py imports this module under a baseline
    # revision's code, which may have no `cpu_affinity`
    from memlineage.affinity import pin_process
    from memlineage.config.kinds import format_cpus, parse_cpus

    chosen = parse_cpus(cpus)
    rest = frozenset(os.sched_getaffinity(0) - chosen)
    if not chosen or not rest:
        sys.exit(f"--server-cpus {cpus!r}: name some CPUs, and leave the client at least one")
    os.environ[CPUS_ENV] = cpus
    pin_process(rest)
    return f"servers pinned to CPUs {format_cpus(chosen)}, this client to {format_cpus(rest)}"


def _pinned_ceiling() -> None:
    """A ceiling started under ``--server-cpus``: on the sidecar's CPUs."""
    if os.environ.get(CPUS_ENV):
        from memlineage.affinity import pin_process
        from memlineage.config.kinds import parse_cpus

        pin_process(parse_cpus(os.environ[CPUS_ENV]))


async def serve_ceiling(spin_us: float = 0.0) -> None:
    _pinned_ceiling()
    server = grpc.aio.server(options=SERVER_OPTIONS)
    pb_grpc.add_MemLineageServicer_to_server(CeilingServicer(spin_us), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"ceiling serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    await server.wait_for_termination()


class SyncCeilingServicer(pb_grpc.MemLineageServicer):
    """The same constant answers, for the synchronous server (``spin_us``: as above)."""

    def __init__(self, spin_us: float = 0.0) -> None:
        self.answers = CeilingServicer()
        self.spin = spin_us * 1e-6

    def Check(self, request, context):
        if self.spin:
            end = time.perf_counter() + self.spin
            while time.perf_counter() < end:
                pass
        return self.answers.check

    def FilterRank(self, request, context):
        return self.answers.filter_rank


def serve_sync_ceiling(spin_us: float = 0.0) -> None:
    """The second ceiling: a bare servicer on the stack the sidecar serves with (the
    synchronous gRPC server, as many worker threads as the sidecar on embedded)."""
    from concurrent.futures import ThreadPoolExecutor

    from memlineage.grpc_api.server import EMBEDDED_WORKERS

    _pinned_ceiling()
    server = grpc.server(ThreadPoolExecutor(max_workers=EMBEDDED_WORKERS), options=SERVER_OPTIONS)
    pb_grpc.add_MemLineageServicer_to_server(SyncCeilingServicer(spin_us), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"ceiling serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    server.wait_for_termination()


# ------------------------------------------------------------------ server processes
READY = re.compile(r"serving on 127\.0\.0\.1:(\d+)")
METRICS_AT = re.compile(r"serving on 127\.0\.0\.1:\d+ \(.*, metrics on 127\.0\.0\.1:(\d+)\)")


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    metrics_port: int | None = None  # a sidecar's Prometheus endpoint (its handler times)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_HANDLER = re.compile(
    r'^memlineage_rpc_latency_seconds_(sum|count)\{method="([A-Za-z]+)"\} (\S+)$', re.M
)


_REUSED = re.compile(r"^memlineage_decisions_reused_total (\S+)$", re.M)


def handler_totals(metrics_port: int | None) -> tuple[float, float, float]:
    """(seconds, calls) the sidecar's handlers took so far, summed over its methods,
    from its own `memlineage_rpc_latency_seconds` histogram: the wall time from the
    request's bytes in to the answer's bytes out, inside the gRPC stack; and how many
    decisions it answered by reuse (`memlineage_decisions_reused`). NaN without an
    endpoint."""
    if metrics_port is None:
        return float("nan"), float("nan"), float("nan")
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read()
    sums = {"sum": 0.0, "count": 0.0}
    for kind, _method, value in _HANDLER.findall(text.decode()):
        sums[kind] += float(value)
    reused = _REUSED.search(text.decode())
    return sums["sum"], sums["count"], float(reused.group(1)) if reused else float("nan")


def launch(args: list[str], log: Path, env: dict[str, str] | None = None) -> ServerProcess:
    """Start a server process; its stderr goes to `log`, where it announces its port.
    `env`: its environment (None: this process's)."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=fh, cwd=REPO, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = READY.search(log.read_text(errors="replace"))
        if m:
            return ServerProcess(proc, int(m.group(1)), log)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"server did not start: {' '.join(args)}\n{log.read_text()[-2000:]}")


def launch_ceiling(tmp: Path, spin_us: float = 0.0, sync: bool = False) -> ServerProcess:
    return launch(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--serve-ceiling",
            "--spin-us",
            str(spin_us),
            *(["--sync"] if sync else []),
        ],
        tmp / f"ceiling-{spin_us:g}{'-sync' if sync else ''}.log",
    )


def launch_sidecar(
    tmp: Path,
    store: str,
    decision_log: str,
    label: str,
    config: Path | None = None,
    runtime: str = "sync",
    env: dict[str, str] | None = None,
    spin_us: float | None = None,
) -> ServerProcess:
    """`memlineage serve`; `config`: a TOML file for `--config` (its flags still win);
    `runtime`: its `--grpc-runtime`; `env`: its environment (another revision's code on
    its `PYTHONPATH`: `revision_bench.py`); `spin_us`: the same server with its Check
    replaced by `STACK_CHECK`'s spin (the `stack` row). Its metrics endpoint is on, on
    a port the system chose, which its ready line names: the bench reads the handlers'
    own time from it (a revision before that line: none, NaN)."""
    command = ["-m", "memlineage"] if spin_us is None else ["-c", STACK_CHECK, f"{spin_us:g}"]
    proc = launch(
        [
            sys.executable,
            *command,
            "serve",
            *(["--config", str(config)] if config else []),
            "--listen",
            "127.0.0.1:0",
            "--store",
            store,
            "--policies",
            str(POLICIES),
            "--decision-log",
            decision_log,
            "--metrics-port",
            "0",
            "--grpc-runtime",
            runtime,
        ],
        tmp / f"{label}.log",
        env,
    )
    named = METRICS_AT.search(proc.log.read_text(errors="replace"))
    proc.metrics_port = int(named.group(1)) if named else None
    return proc


STACK_CHECK = f"""
import sys, time
from memlineage.grpc_api import servicer
from memlineage.v1 import memlineage_pb2 as pb
spin = float(sys.argv.pop(1)) * 1e-6
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from grpc_bench import constant_decision
answer = pb.CheckResponse(decision=constant_decision()).SerializeToString()

@servicer.rpc(pb.CheckRequest, raw=True)
def Check(self, request, context, principal):
    end = time.perf_counter() + spin
    while time.perf_counter() < end:
        pass
    return answer

servicer.MemLineageService.Check = Check
from memlineage.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""The `stack` row's server: `memlineage serve` whose Check, in the servicer's own
wrapper (principal, metrics, errors), spins for the given microseconds of Python and
answers the ceilings' constant: the sidecar's server (pool, registration, wrapper,
its other threads) around a handler that touches no memory, to set beside the same
server deciding (the fresh Check) and beside the bare servicer spinning as long."""


# ------------------------------------------------------------------ the workload
@dataclass
class Workload:
    ids: list[str]
    check: list[pb.CheckRequest]
    filter_rank: list[pb.FilterRankRequest]
    effects: Counter[str]


def memories(n: int, now: float, rng: random.Random, prefix: str = "m") -> list[list[pb.Memory]]:
    """~n memories in dependency layers (each layer only depends on earlier ones); ids
    start with `prefix` (two sidecars on one Redis do not meet)."""
    roots: list[pb.Memory] = []
    n_roots = int(n * 0.6)
    for i in range(n_roots):
        mid = f"{prefix}:{i:06d}"
        kind = i % 10
        created = now - rng.uniform(0, 600)
        m = pb.Memory(id=mid, context_id=f"ctx:{i % 50:03d}")
        if kind in (0, 1):  # what the user said
            m.type = "preference" if kind == 0 else "fact"
            m.creator.kind, m.creator.id = pb.CREATOR_KIND_USER, "user:alice"
            m.claim.subject, m.claim.attribute, m.claim.value = "user:alice", f"attr_{i}", "x"
        elif kind in (2, 3):  # flight prices, half of them stale (> 1 h)
            m.type, m.tags[:] = "tool_result", ["flight_price", "travel"]
            m.creator.kind, m.creator.id = pb.CREATOR_KIND_TOOL, "tool:flight_api"
            created = now - (rng.uniform(7200, 20000) if kind == 2 else rng.uniform(0, 1800))
        elif kind == 4:  # hotel quotes, some older than 7 days (denied)
            m.type, m.tags[:] = "tool_result", ["hotel", "travel"]
            m.creator.kind, m.creator.id = pb.CREATOR_KIND_TOOL, "tool:hotel_api"
            created = now - rng.choice((3600.0, 86400.0 * 8))
        elif kind == 5:  # untrusted and blocked tools
            m.type, m.tags[:] = "tool_result", ["web"]
            m.creator.kind = pb.CREATOR_KIND_TOOL
            m.creator.id = rng.choice(("tool:web_search", "tool:browser", "tool:scraper_v2"))
        elif kind == 6:  # live readings, some stale
            m.type, m.tags[:] = "observation", ["live_reading"]
            m.creator.kind, m.creator.id = pb.CREATOR_KIND_TOOL, "tool:metrics"
            created = now - rng.uniform(0, 900)
        else:  # internal reasoning, some below 0.7 confidence
            m.type = "reasoning"
            m.creator.kind, m.creator.id = pb.CREATOR_KIND_REASONING, "reasoning:planner"
            m.creator_confidence = rng.choice((0.4, 0.8, 0.9, 0.95))
        m.created_at.CopyFrom(_ts(created))
        roots.append(m)
    layers = [roots]
    # no plan is built on a blocked source (policies/sources.mlp refuses that derive)
    earlier = [m.id for m in roots if not m.creator.id.startswith("tool:scraper")]
    per_layer = (n - n_roots) // 2
    for depth in (1, 2):
        layer = []
        for j in range(per_layer):
            m = pb.Memory(
                id=f"{prefix}:d{depth}:{j:06d}", type="plan", context_id=f"ctx:{j % 50:03d}"
            )
            m.creator.kind, m.creator.id = pb.CREATOR_KIND_AGENT, "agent:planner"
            m.dependencies.extend(rng.sample(earlier, rng.randint(1, 3)))
            m.created_at.CopyFrom(_ts(now - rng.uniform(0, 300)))
            layer.append(m)
        layers.append(layer)
        earlier += [m.id for m in layer]
    return layers


async def bounded(concurrency: int, call, requests: list) -> list:
    """`call(request)` for every request, at most `concurrency` in flight (a grpc.aio
    call starts when it is created, so it is created inside the semaphore)."""
    sem = asyncio.Semaphore(concurrency)

    async def one(request):
        async with sem:
            return await call(request)

    return await asyncio.gather(*(one(r) for r in requests))


async def load(address: str, n: int, seed: int, prefix: str = "m") -> Workload:
    """Record the memories through the sidecar, revoke some roots, build the requests."""
    rng = random.Random(seed)
    now = time.time()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemLineageStub(channel)
        recorded: list[str] = []
        layers = memories(n, now, rng, prefix)
        for layer in layers:
            results = await bounded(16, stub.Record, [pb.RecordRequest(memory=m) for m in layer])
            recorded += [r.memory.id for r in results if r.recorded]
        by_id = {m.id: m for m in layers[0]}
        revoke = rng.sample(sorted(set(recorded) & set(by_id)), len(layers[0]) // 30)
        for mid in revoke:
            creator = by_id[mid].creator
            await stub.UpdateStatus(
                pb.UpdateStatusRequest(
                    memory_id=mid,
                    action=pb.STATUS_ACTION_REVOKE,
                    reason="bench: withdrawn",
                    actor=pb.Actor(kind=creator.kind, id=creator.id),
                )
            )
        checks = [
            pb.CheckRequest(operation=pb.OPERATION_READ, memory_id=rng.choice(recorded))
            for _ in range(20_000)
        ]
        frs = []
        for _ in range(300):
            req = pb.FilterRankRequest()
            for mid in rng.sample(recorded, FR_CANDIDATES):
                req.candidates.add(memory_id=mid, similarity=rng.uniform(0.3, 1.0))
            frs.append(req)
        sample = await bounded(16, stub.Check, checks[:500])
    effects = Counter(
        pb.Effect.Name(r.decision.effect).removeprefix("EFFECT_").lower() for r in sample
    )
    return Workload(recorded, checks, frs, effects)


class Writes:
    """The mix's writes: each call a `RecordRequest` of a new memory (fresh id
    ``m:w:<n>``) in the namespace the Checks read; even ones a fresh flight price
    from a trusted tool, odd ones an agent's plan derived from one recorded memory."""

    def __init__(self, recorded: list[str], seed: int) -> None:
        self.recorded = recorded
        self.rng = random.Random(seed)
        self.serial = itertools.count()
        self.accepted = self.refused = 0

    def next(self) -> pb.RecordRequest:
        n = next(self.serial)
        m = pb.Memory(id=f"m:w:{n:07d}", context_id=f"ctx:{n % 50:03d}")
        if n % 2:
            m.type = "plan"
            m.creator.kind, m.creator.id = pb.CREATOR_KIND_AGENT, "agent:planner"
            m.dependencies.append(self.rng.choice(self.recorded))
        else:
            m.type, m.tags[:] = "tool_result", ["flight_price", "travel"]
            m.creator.kind, m.creator.id = pb.CREATOR_KIND_TOOL, "tool:flight_api"
        m.created_at.CopyFrom(_ts(time.time()))
        return pb.RecordRequest(memory=m)

    def done(self, response: pb.RecordResponse) -> None:
        if response.recorded:
            self.accepted += 1
        else:
            self.refused += 1


# ------------------------------------------------------------------ the load generator
@dataclass
class Result:
    server: str
    store: str
    rpc: str
    calls: int
    seconds: float
    latencies: list[float]
    errors: int
    per_call: int
    server_cpu: float = float("nan")  # CPU seconds of the server process(es) in the window
    client_cpu: float = float("nan")  # CPU seconds of this process in the window
    inflight: int = 0  # calls in flight
    # The mix: Record calls among `calls` (`latencies` are then the Checks' only).
    writes: int = 0
    write_latencies: list[float] | None = None
    # The sidecar's handlers in the window, from its latency histogram (NaN: a ceiling).
    handler_seconds: float = float("nan")
    handler_calls: float = float("nan")
    reused: float = float("nan")  # decisions the sidecar answered by reuse in the window

    @property
    def handler_us(self) -> float:
        """Mean wall time of one handler inside the server, from the request's bytes to
        the answer's (the rest of `server_us` is the gRPC stack and other threads)."""
        if not self.handler_calls:
            return float("nan")
        return self.handler_seconds / self.handler_calls * 1e6

    @property
    def server_us(self) -> float:
        return self.server_cpu / self.calls * 1e6 if self.calls else float("nan")

    @property
    def client_us(self) -> float:
        return self.client_cpu / self.calls * 1e6 if self.calls else float("nan")

    @property
    def rps(self) -> float:
        return self.calls / self.seconds

    @property
    def decisions(self) -> float:
        return self.rps * self.per_call

    def pct(self, q: float, latencies: list[float] | None = None) -> float:
        lat = sorted(self.latencies if latencies is None else latencies)
        return lat[min(len(lat) - 1, int(len(lat) * q))] * 1e3 if lat else float("nan")


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of processes (all their threads), from /proc; NaN where unavailable."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            return float("nan")
        total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


async def drive(
    address: str,
    rpc: str,
    requests: list,
    *,
    concurrency: int,
    warmup: float,
    duration: float,
    pids: list[int],
    writes: Writes | None = None,
    metrics_port: int | None = None,
) -> tuple[list[float], list[float], int, float, float, tuple[float, float, float]]:
    """`concurrency` coroutines, each one call in flight; only completions inside the
    measured window count (their latency is from send to answer). Also the CPU time the
    server processes (`pids`) and this client process spent during the window.
    With `writes`, every `WRITE_EVERY`-th call of each coroutine is a `Record` of
    `writes.next()` instead (coroutines start at spread offsets, so the writes are
    spread too). Returns the latencies of `rpc` calls and of Record calls, and with a
    `metrics_port` the (seconds, calls) the sidecar's handlers took in the window and
    the decisions it reused in it (one scrape at each end of it, a few ms of this
    client's loop each)."""
    async with grpc.aio.insecure_channel(
        address, options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    ) as channel:
        await channel.channel_ready()
        stub = pb_grpc.MemLineageStub(channel)
        call, record = getattr(stub, rpc), stub.Record
        loop = asyncio.get_running_loop()
        start = loop.time()
        t_from, t_to = start + warmup, start + warmup + duration
        latencies: list[float] = []
        write_latencies: list[float] = []
        errors = 0
        n = len(requests)
        cpu: dict[str, tuple[float, float]] = {}
        handlers: dict[str, tuple[float, float]] = {}

        def snapshot(name: str) -> None:
            cpu[name] = (cpu_seconds(pids), time.process_time())
            handlers[name] = handler_totals(metrics_port)

        loop.call_at(t_from, snapshot, "from")
        loop.call_at(t_to, snapshot, "to")

        async def worker(k: int) -> None:
            nonlocal errors
            i = k * 7919
            clock = time.perf_counter
            while True:
                write = writes.next() if writes and i % WRITE_EVERY == WRITE_EVERY - 1 else None
                t0 = clock()
                if loop.time() >= t_to:
                    return
                try:
                    if write is None:
                        await call(requests[i % n])
                    else:
                        writes.done(await record(write))
                except grpc.aio.AioRpcError:
                    errors += 1
                t1 = clock()
                now = loop.time()
                if t_from <= now < t_to:
                    (latencies if write is None else write_latencies).append(t1 - t0)
                i += 1

        await asyncio.gather(*(worker(k) for k in range(concurrency)))
    (s0, c0), (s1, c1) = cpu["from"], cpu["to"]
    (h0, n0, r0), (h1, n1, r1) = handlers["from"], handlers["to"]
    return latencies, write_latencies, errors, s1 - s0, c1 - c0, (h1 - h0, n1 - n0, r1 - r0)


async def measure(
    server: str,
    store: str,
    rpc: str,
    proc: ServerProcess,
    requests: list,
    opts: argparse.Namespace,
    profiler: Profiler | None = None,
    extra_pids: tuple[int, ...] = (),
    *,
    concurrency: int | None = None,
    writes: Writes | None = None,
) -> Result:
    per_call = FR_CANDIDATES if rpc == "FilterRank" else 1
    inflight = concurrency or opts.concurrency
    sampler = None
    if profiler is not None:
        tag = re.sub(r"[^A-Za-z0-9.+-]+", "_", server).strip("_")
        sampler = profiler.start(
            f"{tag}-{store}-{rpc}-{inflight}", proc, opts.warmup, opts.duration
        )
    lat, wlat, errors, server_cpu, client_cpu, (handler_s, handler_n, reused) = await drive(
        proc.address,
        rpc,
        requests,
        concurrency=inflight,
        warmup=opts.warmup,
        duration=opts.duration,
        pids=[proc.proc.pid, *extra_pids],
        writes=writes,
        metrics_port=proc.metrics_port,
    )
    if sampler is not None:
        profiler.finish(sampler)
    return Result(
        server,
        store,
        rpc,
        len(lat) + len(wlat),
        opts.duration,
        lat,
        errors,
        per_call,
        server_cpu,
        client_cpu,
        inflight,
        len(wlat),
        wlat if writes else None,
        handler_s,
        handler_n,
        reused,
    )


@contextlib.asynccontextmanager
async def started_pair(
    tmp: Path, label: str, config: Path, baseline: Path, opts: argparse.Namespace
) -> AsyncIterator[tuple[ServerProcess, ServerProcess, Workload]]:
    """A reuse-off sidecar on the embedded store with `config` and its twin with
    `baseline` (reuse off, the defaults), both started now and loaded with the same
    memories, for a setting's paired comparison. A sidecar that has served the rows
    before ran FilterRank 8-14% slower than one started after it with the same
    configuration (2026-12-06), so the baseline is a twin, not the sidecar of the
    fresh rows. Yields the twin, the variant and the variant's workload."""
    twin = launch_sidecar(tmp, "embedded", "off", f"{label}-twin", baseline, opts.runtime)
    try:
        variant = launch_sidecar(tmp, "embedded", "off", label, config, opts.runtime)
        try:
            await load(twin.address, opts.memories, opts.seed, "f")
            loaded = await load(variant.address, opts.memories, opts.seed, "f")
            yield twin, variant, loaded
        finally:
            variant.stop()
    finally:
        twin.stop()


Side = tuple[str, str, ServerProcess, list, Writes | None]
"""One server measured in `alternate`: its label, store, process, requests, writes."""


async def alternate(
    sides: list[Side], rpc: str, opts: argparse.Namespace, rounds: int
) -> list[list[Result]]:
    """`rounds` windows of `opts` (duration, warm-up, calls in flight) per side, taken
    in turn, each round in the other order than the last: what else runs on the
    machine weighs on every side alike, and no side is always second. Each side's
    results, in the order of `sides`."""
    out: list[list[Result]] = [[] for _ in sides]
    order = list(range(len(sides)))
    for k in range(rounds):
        for i in order if k % 2 == 0 else order[::-1]:
            label, store, proc, requests, writes = sides[i]
            out[i].append(await measure(label, store, rpc, proc, requests, opts, writes=writes))
    return out


async def paired(
    ceiling: ServerProcess,
    sidecar: ServerProcess,
    rpc: str,
    requests: list,
    opts: argparse.Namespace,
    label: str = AIO,
    sidecar_label: str = BEST,
    writes: Writes | None = None,
    inflight: int | None = None,
) -> tuple[Result, Result, list[float]]:
    """The ceiling and the sidecar measured in alternation (`alternate`), `opts.rounds`
    short windows each (the same total time as one row). With `writes`, the sidecar's
    windows are the Record mix (the ceiling serves Checks only, as in the mix row).
    `inflight`: calls in flight, else `opts.concurrency`; with 1, each round's ratio
    is its p50 latency over the ceiling's (else requests/s over the ceiling's).
    Returns the summed results and the ratio of each round."""
    short = argparse.Namespace(
        **{
            **vars(opts),
            "duration": opts.duration / opts.rounds,
            "warmup": 0.3,
            "concurrency": inflight or opts.concurrency,
        }
    )
    ceiling_rows, sidecar_rows = await alternate(
        [
            (label, "-", ceiling, requests, None),
            (sidecar_label, "embedded", sidecar, requests, writes),
        ],
        rpc,
        short,
        opts.rounds,
    )
    pairs = list(zip(ceiling_rows, sidecar_rows, strict=True))

    def total(rows: list[Result]) -> Result:
        first = rows[0]
        return Result(
            first.server,
            first.store,
            rpc,
            sum(r.calls for r in rows),
            sum(r.seconds for r in rows),
            [x for r in rows for x in r.latencies],
            sum(r.errors for r in rows),
            first.per_call,
            sum(r.server_cpu for r in rows),
            sum(r.client_cpu for r in rows),
            first.inflight,
            handler_seconds=sum(r.handler_seconds for r in rows),
            handler_calls=sum(r.handler_calls for r in rows),
            writes=sum(r.writes for r in rows),
            reused=sum(r.reused for r in rows),
        )

    return (
        total([c for c, _ in pairs]),
        total([s for _, s in pairs]),
        [s.pct(0.5) / c.pct(0.5) if inflight == 1 else s.rps / c.rps for c, s in pairs],
    )


# ------------------------------------------------------------------ profiling (py-spy)
class Profiler:
    """py-spy record on a running sidecar for the measured window, collapsed stacks out.

    Python frames only and non-blocking by default (little perturbation); with
    `native`, C frames too (GC, syscalls, cygrpc), but py-spy then pauses the
    server for every sample, which costs it a good part of its throughput."""

    def __init__(self, out: Path, native: bool = False, gil: bool = False) -> None:
        self.out = out
        self.native, self.gil = native, gil
        out.mkdir(parents=True, exist_ok=True)
        exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which(
            "py-spy"
        )
        if exe is None:
            raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
        self.exe = exe
        self.reports: list[str] = []

    def start(self, label: str, proc: ServerProcess, warmup: float, duration: float):
        path = self.out / f"{label}.txt"
        path.unlink(missing_ok=True)
        cmd = [
            self.exe,
            "record",
            "--pid",
            str(proc.proc.pid),
            "--format",
            "raw",
            "--duration",
            str(max(1, int(duration))),
            "--output",
            str(path),
        ]
        cmd += ["--native", "--rate", "100"] if self.native else ["--nonblocking", "--rate", "250"]
        cmd += ["--gil"] if self.gil else []
        return (
            label,
            path,
            subprocess.Popen(
                ["sh", "-c", f'sleep {warmup} && exec "$@"', "sh", *cmd],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            ),
        )

    def finish(self, sampler) -> None:
        label, path, proc = sampler
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if not path.exists():
            self.reports.append(f"{label}: no profile ({err.decode(errors='replace')[-300:]})")
            return
        self.reports.append(summarize(label, path))


FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
# Where a sample's time goes: the innermost frame that belongs to one of these.
LAYERS = (
    ("memlineage_dsl/", "dsl: policy evaluation (memlineage_dsl, compiled .mlp)"),
    ("<mlp:", "dsl: policy evaluation (memlineage_dsl, compiled .mlp)"),
    ("memlineage/store/", "store (memlineage/store, lineage)"),
    ("memlineage/lineage/", "store (memlineage/store, lineage)"),
    ("memlineage/engine/", "engine (memlineage/engine)"),
    ("memlineage/grpc_api/serde", "grpc_api/serde (proto conversion)"),
    ("memlineage/grpc_api/", "grpc_api (servicer, auth)"),
    ("memlineage/metrics", "metrics (prometheus_client)"),
)
RUNTIME = "gRPC C core + asyncio loop (cygrpc; below Python, outside the handler)"
ROOTS = (
    "<module> (",
    "main (memlineage/cli",
    "_serve (",
    "_run_module_as_main",
    "_run_code (",
    "run (asyncio",
    "Runner.run",
    "BaseEventLoop.run_",
)


def _short(frame: str) -> str:
    m = FRAME.match(frame)
    if not m:
        return frame
    file = m.group("file")
    if file.startswith("/"):
        for root in ("/memlineage_dsl/", "/memlineage/", "/grpc/", "/asyncio/", "/redis/"):
            if root in file:
                file = root.strip("/") + "/" + file.split(root, 1)[1]
                break
        else:
            file = Path(file).name
    return f"{m.group('fn')} ({file})"


def _layer(frames: list[str]) -> str:
    for f in reversed(frames):
        for key, layer in LAYERS:
            if key in f:
                return layer
    if any("redis/" in f for f in frames):
        return "store (memlineage/store, lineage)"
    if frames[-1].startswith(("gc_collect", "_PyObject_GC", "collect (")):
        return "Python GC"
    return RUNTIME


def summarize(label: str, path: Path, top: int = 14) -> str:
    """Busy samples of the server by layer, then own and inclusive time per function."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    layers: Counter[str] = Counter()
    total = idle = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [_short(f) for f in stack.split(";")]
        leaf = frames[-1]
        # Waiting in epoll / on a queue / in an idle pool thread is not work.
        if any(
            w in leaf
            for w in ("select (", "poll (", "wait (", "epoll_wait", "_worker (", "pthread_cond")
        ) or (frames[0].startswith("Thread._bootstrap") and len(frames) <= 3):
            idle += n
            continue
        total += n
        own[leaf] += n
        layers[_layer(frames)] += n
        for f in set(frames):
            incl[f] += n
    if not total:
        return f"{label}: no busy samples"
    out = [
        f"--- profile {label}: {total} busy samples ({idle} idle) ---",
        "  by layer (innermost project frame of each sample)",
    ]
    out += [f"    {100 * c / total:5.1f}%  {k}" for k, c in layers.most_common()]
    out.append("  own time (leaf frame)")
    out += [f"    {100 * c / total:5.1f}%  {f}" for f, c in own.most_common(top)]
    out.append("  inclusive time (project frames)")
    mine = [(f, c) for f, c in incl.most_common() if "memlineage" in f and not f.startswith(ROOTS)]
    out += [f"    {100 * c / total:5.1f}%  {f}" for f, c in mine[: top + 6]]
    return "\n".join(out)


# ------------------------------------------------------------------ the run
RPC_ORDER = ("Check", "FilterRank")


def table(results: list[Result], ceilings: dict[tuple[str, int], tuple[Result, Result]]) -> str:
    """Rows grouped by RPC and calls in flight, the ceilings of each group first; the
    ratios are to the aio and to the sync ceiling of the same RPC and concurrency."""
    width = max([len(r.server) for r in results] + [6])
    head = (
        f"{'server':<{width}} {'store':<8} {'RPC':<11} {'inflt':>5} {'requests/s':>10} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'decisions/s':>11} {'vs aio':>6} {'vs sync':>7} "
        f"{'srv CPU us':>10} {'handler us':>10} {'cli CPU us':>10} {'errors':>6}"
    )
    rows = [head, "-" * len(head)]
    groups = sorted(
        {(r.rpc, r.inflight) for r in results}, key=lambda g: (RPC_ORDER.index(g[0]), -g[1])
    )
    for rpc, inflight in groups:
        aio, sync = ceilings.get((rpc, inflight), (None, None))
        group = [r for r in results if (r.rpc, r.inflight) == (rpc, inflight)]
        order = (FRESH, MIX, BEST, BEST_LOG)
        group.sort(
            key=lambda r: (
                0 if r is aio else 1 if r is sync else 2,
                r.store != "-",
                r.store != "embedded",
                order.index(r.server) if r.server in order else -1,
            )
        )
        for r in group:
            vs_aio = f"{r.rps / aio.rps:.0%}" if aio and r is not aio else "-"
            vs_sync = f"{r.rps / sync.rps:.0%}" if sync and r is not sync else "-"
            name = "Check+5%Rec" if r.writes or r.write_latencies is not None else rpc
            rows.append(
                f"{r.server:<{width}} {r.store:<8} {name:<11} {r.inflight:>5} "
                f"{r.rps:>10,.0f} {r.pct(0.5):>7.2f} {r.pct(0.99):>7.2f} "
                f"{r.decisions:>11,.0f} {vs_aio:>6} {vs_sync:>7} "
                f"{r.server_us:>10,.0f} {_us(r.handler_us):>10} {r.client_us:>10,.0f} "
                f"{r.errors:>6}"
            )
    rows.append(
        "srv CPU us / cli CPU us: CPU time of the server process(es) / of the client "
        "per call in the window (redis rows: sidecar + redis-server); handler us: the "
        "sidecar's own latency histogram, mean wall time of a handler inside the server "
        "(request bytes in to answer bytes out); the rest of srv CPU is the gRPC stack"
    )
    if any(r.write_latencies is not None for r in results):
        rows.append(
            f"Check+5%Rec: 1 Record of a new memory per {WRITE_EVERY - 1} Checks, same "
            f"namespace; requests/s counts ALL calls, p50/p99 are the Checks' only; "
            f"vs aio / vs sync: calls/s of the mix over the ceiling's Check calls/s "
            f"(same Check request list; the ceilings serve no Record)"
        )
    return "\n".join(rows)


def _us(value: float) -> str:
    return "-" if value != value else f"{value:,.0f}"


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _effects(workload: Workload) -> str:
    total = sum(workload.effects.values()) or 1
    return ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(workload.effects.items()))


async def run(opts: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="grpc-bench-"))
    profiler = Profiler(Path(opts.profile), opts.native, opts.gil) if opts.profile else None
    rows: set[str] = set(opts.rows) - ({"log"} if opts.no_log_row else set())
    results: list[Result] = []
    ceilings: dict[tuple[str, int], tuple[Result, Result]] = {}
    notes: list[str] = []
    redis_server = None
    ceiling = sync_ceiling = None
    interleaved: dict[str, tuple[Result, Result, list[float]]] = {}
    calibrated = False
    reuse_off = tmp / "reuse-off.toml"
    reuse_off.write_text(REUSE_OFF_TOML)
    candidate = tmp / "shadow-candidate"
    shutil.copytree(POLICIES, candidate)
    (candidate / "zz_shadow.mlp").write_text(SHADOW_RULE)
    with_shadow = tmp / "shadow.toml"
    with_shadow.write_text(f"{REUSE_OFF_TOML}shadow_policy_dir = {json.dumps(str(candidate))}\n")
    no_views = tmp / "no-views.toml"
    no_views.write_text(f"{REUSE_OFF_TOML}keep_views = false\n")
    other_workers = tmp / "other-workers.toml"
    other_workers.write_text(f"{REUSE_OFF_TOML}grpc_workers = {opts.other_workers}\n")
    print(
        f"gRPC bench on loopback, a SHARED {os.cpu_count()}-core box (other jobs run beside "
        f"it: figures are indicative, compare rows of one run), load average {_loadavg()}"
    )
    print(
        f"Python {sys.version.split()[0]}, grpcio {grpc.__version__}; client: this process, "
        f"grpc.aio, 1 channel, {opts.concurrency} calls in flight unless stated (inflt); "
        f"each server in its own process; {opts.pinned or 'no process pinned to a CPU'}"
    )
    print(
        f"per row: warm-up {opts.warmup:g} s, measured {opts.duration:g} s; FilterRank: "
        f"{FR_CANDIDATES} candidates per call (decisions/s = calls/s x {FR_CANDIDATES}); "
        f"sidecar: bundled policies/, record_access on, decision log off unless stated; "
        f"reuse off: --config with `reuse_decisions = false`; --grpc-runtime {opts.runtime}"
    )
    print(f"rows: {', '.join(r for r in ROWS if r in rows)}; backends: {', '.join(opts.backends)}")

    same_label = SYNC if opts.runtime == "sync" else AIO

    def same() -> ServerProcess:
        """The ceiling on the stack the sidecar serves with (`--runtime`)."""
        process = sync_ceiling if opts.runtime == "sync" else ceiling
        assert process is not None
        return process

    async def ceiling_rows(rpc: str, requests: list, inflight: int) -> None:
        """Both ceilings for this RPC and concurrency, once, right before the first
        sidecar row that is compared with them."""
        if (rpc, inflight) in ceilings:
            return
        pair = (
            await measure(AIO, "-", rpc, ceiling, requests, opts, concurrency=inflight),
            await measure(SYNC, "-", rpc, sync_ceiling, requests, opts, concurrency=inflight),
        )
        ceilings[rpc, inflight] = pair
        results.extend(pair)

    async def calibration(workload: Workload) -> None:
        """Calibration: each ceiling again, its Check first spinning N us of Python —
        what fraction of the ceiling, and what p50 at one call in flight, a handler
        of N us can reach on each stack at best (the sync one is the sidecar's)."""
        for spin in opts.handler_budget:
            for sync in (False, True):
                spinner = launch_ceiling(tmp, spin, sync=sync)
                label = f"{SYNC if sync else AIO} + {spin:g} us handler"
                try:
                    for inflight in (opts.concurrency, 1) if sync else (opts.concurrency,):
                        await ceiling_rows("Check", workload.check, inflight)
                        results.append(
                            await measure(
                                label,
                                "-",
                                "Check",
                                spinner,
                                workload.check,
                                opts,
                                concurrency=inflight,
                            )
                        )
                finally:
                    spinner.stop()

    async def stack_rows(sidecar: ServerProcess, workload: Workload) -> None:
        """The `stack` row: the sidecar's server whose Check spins as long as the fresh
        Check's handler took (`STACK_CHECK`), in alternation with the bare sync servicer
        spinning as long (what the server costs around a handler of that length) and
        with the fresh sidecar (what a decision costs beyond its length)."""
        fresh = next(
            r
            for r in results
            if (r.server, r.store, r.rpc, r.inflight)
            == (FRESH, "embedded", "Check", opts.concurrency)
        )
        spin = round(fresh.handler_us)
        label = STACK.format(spin)
        stack = launch_sidecar(tmp, "embedded", "off", "stack", reuse_off, spin_us=spin)
        bare = launch_ceiling(tmp, spin, sync=True)
        try:
            bare_label = f"{SYNC} + {spin:g} us handler"
            interleaved["stack/bare"] = await paired(
                bare, stack, "Check", workload.check, opts, bare_label, label
            )
            interleaved["stack/fresh"] = await paired(
                stack, sidecar, "Check", workload.check, opts, label, FRESH
            )
        finally:
            stack.stop()
            bare.stop()

    try:
        ceiling = launch_ceiling(tmp)
        sync_ceiling = launch_ceiling(tmp, sync=True)
        for backend in opts.backends:
            store_url = fresh_url = "embedded"
            extra: tuple[int, ...] = ()
            if backend == "redis":
                if opts.redis_url:  # the fresh sidecar's memories have their own ids
                    store_url = fresh_url = opts.redis_url
                else:
                    if redis_server is None:
                        from support.redis_servers import start_redis_server

                        redis_server = start_redis_server(tmp / "redis", aof=False)
                    store_url = redis_server.url
                    fresh_url = re.sub(r"/\d+$", "/1", store_url)  # a database of its own
                    if redis_server.proc:
                        extra = (redis_server.proc.pid,)

            # Reuse on (the default sidecar): best case first, then the mix (it writes).
            if rows & {"best-check", "best-fr", "mix"}:
                sidecar = launch_sidecar(
                    tmp, store_url, "off", f"sidecar-{backend}", runtime=opts.runtime
                )
                try:
                    t0 = time.perf_counter()
                    workload = await load(sidecar.address, opts.memories, opts.seed)
                    notes.append(
                        f"{backend}, reuse on: recorded {len(workload.ids)} memories "
                        f"through Record in {time.perf_counter() - t0:.1f} s; Check "
                        f"read effects: {_effects(workload)}"
                    )
                    if "best-check" in rows:
                        await ceiling_rows("Check", workload.check, opts.concurrency)
                        results.append(
                            await measure(
                                BEST,
                                backend,
                                "Check",
                                sidecar,
                                workload.check,
                                opts,
                                profiler,
                                extra,
                            )
                        )
                        if backend == "embedded" and opts.rounds:
                            interleaved["best/aio"] = await paired(
                                ceiling, sidecar, "Check", workload.check, opts
                            )
                            interleaved["best/same"] = await paired(
                                same(), sidecar, "Check", workload.check, opts, same_label
                            )
                    if "best-fr" in rows:
                        await ceiling_rows("FilterRank", workload.filter_rank, opts.concurrency)
                        results.append(
                            await measure(
                                BEST,
                                backend,
                                "FilterRank",
                                sidecar,
                                workload.filter_rank,
                                opts,
                                profiler,
                                extra,
                            )
                        )
                    if not calibrated:
                        await calibration(workload)
                        calibrated = True
                    if "mix" in rows:
                        await ceiling_rows("Check", workload.check, opts.concurrency)
                        writes = Writes(workload.ids, opts.seed)
                        mix = await measure(
                            MIX,
                            backend,
                            "Check",
                            sidecar,
                            workload.check,
                            opts,
                            profiler,
                            extra,
                            writes=writes,
                        )
                        results.append(mix)
                        notes.append(
                            f"{backend}, 5% Record mix: {mix.writes:,} Records in the window "
                            f"({mix.writes / max(mix.calls, 1):.1%} of calls), Record p50 "
                            f"{mix.pct(0.5, mix.write_latencies):.2f} ms, p99 "
                            f"{mix.pct(0.99, mix.write_latencies):.2f} ms; Checks answered "
                            f"by reuse {mix.reused / max(mix.calls - mix.writes, 1):.0%}; "
                            f"over warm-up + "
                            f"window {writes.accepted:,} recorded, {writes.refused:,} refused "
                            f"by the policies"
                        )
                        if backend == "embedded" and opts.rounds:
                            interleaved["mix/same"] = await paired(
                                same(),
                                sidecar,
                                "Check",
                                workload.check,
                                opts,
                                same_label,
                                MIX,
                                writes=writes,
                            )
                finally:
                    sidecar.stop()

            # Reuse off: every decision fresh.
            latency = backend == "embedded" and "latency" in rows
            if rows & {"fresh-check", "fresh-fr", "shadow", "views", "workers", "stack"} or latency:
                sidecar = launch_sidecar(
                    tmp, fresh_url, "off", f"fresh-{backend}", reuse_off, opts.runtime
                )
                try:
                    t0 = time.perf_counter()
                    workload = await load(sidecar.address, opts.memories, opts.seed, "f")
                    notes.append(
                        f"{backend}, reuse off: recorded {len(workload.ids)} memories "
                        f"through Record in {time.perf_counter() - t0:.1f} s; Check "
                        f"read effects: {_effects(workload)}"
                    )
                    if "fresh-check" in rows:
                        await ceiling_rows("Check", workload.check, opts.concurrency)
                        results.append(
                            await measure(
                                FRESH,
                                backend,
                                "Check",
                                sidecar,
                                workload.check,
                                opts,
                                profiler,
                                extra,
                            )
                        )
                        if backend == "embedded" and opts.rounds:
                            interleaved["fresh/same"] = await paired(
                                same(), sidecar, "Check", workload.check, opts, same_label, FRESH
                            )
                    if "fresh-fr" in rows:
                        await ceiling_rows("FilterRank", workload.filter_rank, opts.concurrency)
                        results.append(
                            await measure(
                                FRESH,
                                backend,
                                "FilterRank",
                                sidecar,
                                workload.filter_rank,
                                opts,
                                profiler,
                                extra,
                            )
                        )
                    if latency:
                        await ceiling_rows("Check", workload.check, 1)
                        results.append(
                            await measure(
                                FRESH,
                                backend,
                                "Check",
                                sidecar,
                                workload.check,
                                opts,
                                profiler,
                                extra,
                                concurrency=1,
                            )
                        )
                        if backend == "embedded" and opts.rounds:
                            interleaved["latency/same"] = await paired(
                                same(),
                                sidecar,
                                "Check",
                                workload.check,
                                opts,
                                same_label,
                                FRESH,
                                inflight=1,
                            )
                    if backend == "embedded" and "shadow" in rows:
                        async with started_pair(
                            tmp, "fresh-shadow-embedded", with_shadow, reuse_off, opts
                        ) as (twin, shadow, loaded):
                            same = [r.SerializeToString() for r in loaded.check] == [
                                r.SerializeToString() for r in workload.check
                            ]
                            notes.append(
                                f"shadow row: a second reuse-off sidecar with the candidate "
                                f"{candidate.name} (+1 rule), beside a twin without it, both "
                                f"started for the row, the same {len(loaded.ids)} memories"
                                f" and Check requests ({'identical' if same else 'DIFFERENT'})"
                            )
                            interleaved["shadow/fresh"] = await paired(
                                twin, shadow, "Check", workload.check, opts, FRESH, SHADOW
                            )
                            async with grpc.aio.insecure_channel(shadow.address) as ch:
                                st = await pb_grpc.PolicyAdminStub(ch).Shadow(
                                    pb.ShadowRequest(), timeout=10
                                )
                            notes.append(
                                f"shadow candidate {st.version}: {st.compared:,} decisions "
                                f"compared, {st.disagreed:,} with another effect"
                            )
                    if backend == "embedded" and "views" in rows and opts.rounds:
                        async with started_pair(tmp, "fresh-cold", no_views, reuse_off, opts) as (
                            twin,
                            cold,
                            _,
                        ):
                            interleaved["views/fresh"] = await paired(
                                cold, twin, "Check", workload.check, opts, COLD, FRESH
                            )
                    if backend == "embedded" and "workers" in rows and opts.rounds:
                        label = OTHER_WORKERS.format(opts.other_workers)
                        async with started_pair(
                            tmp, "fresh-workers", other_workers, reuse_off, opts
                        ) as (twin, other, _):
                            for rpc, requests in (
                                ("Check", workload.check),
                                ("FilterRank", workload.filter_rank),
                            ):
                                interleaved[f"workers/{rpc}"] = await paired(
                                    other, twin, rpc, requests, opts, label, FRESH
                                )
                            one = argparse.Namespace(**{**vars(opts), "concurrency": 1})
                            interleaved["workers/Check@1"] = await paired(
                                other, twin, "Check", workload.check, one, label, FRESH
                            )
                    if backend == "embedded" and "stack" in rows and opts.rounds:
                        await stack_rows(sidecar, workload)
                    if not calibrated:
                        await calibration(workload)
                        calibrated = True
                finally:
                    sidecar.stop()

            if backend == "embedded" and "log" in rows:
                decision_log = tmp / "decisions.jsonl"
                sidecar = launch_sidecar(
                    tmp,
                    "embedded",
                    str(decision_log),
                    "sidecar+decision-log-embedded",
                    runtime=opts.runtime,
                )
                try:
                    workload = await load(sidecar.address, opts.memories, opts.seed)
                    await ceiling_rows("Check", workload.check, opts.concurrency)
                    results.append(
                        await measure(
                            BEST_LOG, backend, "Check", sidecar, workload.check, opts, profiler
                        )
                    )
                    text = decision_log.read_text()
                    lines, size = text.count("\n"), len(text.encode())
                    notes.append(
                        f"decision log: {lines:,} JSON lines, {size / 1e6:.1f} MB "
                        f"({size / max(lines, 1):.0f} B per decision)"
                    )
                finally:
                    sidecar.stop()
    finally:
        if ceiling is not None:
            ceiling.stop()
        if sync_ceiling is not None:
            sync_ceiling.stop()
        if redis_server is not None:
            redis_server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(table(results, ceilings))
    print()
    for note in notes:
        print(note)
    print(f"load average after the run: {_loadavg()}")
    print()
    report_targets(results, ceilings, interleaved, opts)
    if profiler is not None:
        print()
        print(
            "(profiled run: py-spy sampled the sidecar during each measured window; "
            "throughput above is perturbed)"
        )
        for rep in profiler.reports:
            print(rep)
    return 0


IN_LOOP = """
import statistics, sys, time
sys.path[:0] = [{bench!r}, {tests!r}]
from instructions_bench import check_calls
from memlineage.sidecar import settle_heap
run, one, requests = check_calls(2000)
for _ in range(2):
    run()
settle_heap()  # as `memlineage serve` does once it is built
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < {seconds}:
    run()
    n += 2000
print((time.perf_counter() - t0) / n * 1e6)
for idle in (0.001, 0.01):
    took = []
    for raw in requests[:{idle_calls}]:
        time.sleep(idle)
        t = time.perf_counter()
        one(raw)
        took.append((time.perf_counter() - t) * 1e6)
    print(statistics.median(took))
"""


def in_loop_check_us(seconds: float, idle_calls: int = 200) -> tuple[float, float, float]:
    """A fresh Check's time in a process of its own, no gRPC: request bytes in, answer
    bytes out through the servicer (`instructions_bench.py`'s `check` workload: reuse
    off, views kept, 2,000 memories). In one loop, caches hot; then the median of
    `idle_calls` single Checks each after 1 ms, then 10 ms, asleep: the same code, with
    what it touches gone from the CPU's caches meanwhile (at one call in flight the
    handler starts after the server slept through the round trip). NaNs if it fails."""
    code = IN_LOOP.format(
        bench=str(REPO / "bench"),
        tests=str(REPO / "tests"),
        seconds=seconds,
        idle_calls=idle_calls,
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    try:
        hot, after_1ms, after_10ms = (float(x) for x in out.stdout.split()[-3:])
    except ValueError:
        return math.nan, math.nan, math.nan
    return hot, after_1ms, after_10ms


IN_LOOP_FR = """
import statistics, sys, time
sys.path[:0] = [{bench!r}, {tests!r}]
import numpy as np
from instructions_bench import filter_rank_calls
from memlineage.sidecar import settle_heap
run, one, requests = filter_rank_calls(200)
run()
settle_heap()  # as `memlineage serve` does once it is built
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < {seconds}:
    run()
    n += len(requests)
print((time.perf_counter() - t0) / n * 1e6)
for size in {flushes!r}:
    flush = np.zeros(size, dtype=np.uint8)
    took = []
    for raw in requests:
        flush[::64] += 1  # a write to each of its cache lines: what the caches held is gone
        t = time.perf_counter()
        one(raw)
        took.append((time.perf_counter() - t) * 1e6)
    print(statistics.median(took))
"""

FLUSHES = (8 << 20, 64 << 20)
"""Bytes written between two in-loop FilterRanks: past a core's L2 (and a share of a
shared L3), then past any L3 this bench has met."""


def in_loop_filter_rank_us(seconds: float) -> tuple[float, ...]:
    """A fresh FilterRank's time (100 candidates) in a process of its own, no gRPC:
    request bytes in, answer bytes out through the servicer (`instructions_bench.py`'s
    `filter_rank_calls`). In one loop, caches hot; then the median single call after
    each of `FLUSHES` was written: the same code on caches emptied of what it touches.
    NaNs if it fails."""
    code = IN_LOOP_FR.format(
        bench=str(REPO / "bench"), tests=str(REPO / "tests"), seconds=seconds, flushes=FLUSHES
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    try:
        hot, *flushed = (float(x) for x in out.stdout.split()[-1 - len(FLUSHES) :])
    except ValueError:
        return (math.nan,) * (1 + len(FLUSHES))
    return (hot, *flushed)


def cpu_bound(ceiling: Result, sidecar: Result, target: float, stack: str) -> str:
    """What bounds a 32-in-flight ratio: each server runs its Python under one GIL, so
    at about one core its calls/s are one over its CPU per call (the cores in use say
    whether it got there)."""
    c_cores = ceiling.server_cpu / ceiling.seconds
    s_cores = sidecar.server_cpu / sidecar.seconds
    return (
        f"the bound: the servers ran at {c_cores:.2f} ({stack}) and {s_cores:.2f} "
        f"(sidecar) cores, the client at {ceiling.client_cpu / ceiling.seconds:.2f} and "
        f"{sidecar.client_cpu / sidecar.seconds:.2f}; server CPU per call "
        f"{ceiling.server_us:,.0f} vs {sidecar.server_us:,.0f} us = "
        f"{ceiling.server_us / sidecar.server_us:.0%}: at one core each, {target:.0%} needs "
        f"the sidecar's at {ceiling.server_us / target:,.0f} us or less"
    )


def report_targets(
    results: list[Result],
    ceilings: dict[tuple[str, int], tuple[Result, Result]],
    interleaved: dict[str, tuple[Result, Result, list[float]]],
    opts: argparse.Namespace,
) -> None:
    """The target lines, embedded only: the headline ones (fresh, mix, one in flight,
    FilterRank fresh) against the same-stack ceiling, then the best case."""

    def row(label: str, rpc: str, inflight: int, mix: bool = False) -> Result | None:
        for r in results:
            if (r.server, r.store, r.rpc, r.inflight) == (label, "embedded", rpc, inflight) and (
                r.write_latencies is not None
            ) == mix:
                return r
        return None

    def rounds(key: str) -> str:
        """A row measured again in alternating windows (`paired`): the sidecar's
        requests/s over the ceiling's, or at one call in flight its p50 over theirs."""
        if key not in interleaved:
            return ""
        c, sc, ratios = interleaved[key]
        window = opts.duration / opts.rounds
        head = f"; interleaved ({opts.rounds} alternating windows of {window:g} s): "
        if c.inflight == 1:
            return head + (
                f"p50 {sc.pct(0.5):.3f} / {c.pct(0.5):.3f} ms = {sc.pct(0.5) / c.pct(0.5):.2f}x, "
                f"median round {statistics.median(ratios):.2f}x, "
                f"rounds {min(ratios):.2f}-{max(ratios):.2f}x"
            )
        return head + (
            f"{sc.rps / c.rps:.0%}, median round {statistics.median(ratios):.0%}, "
            f"rounds {min(ratios):.0%}-{max(ratios):.0%}"
        )

    n = opts.concurrency
    stack = f"bare {opts.runtime}"  # the ceiling on the sidecar's own stack
    aio, sync = ceilings.get(("Check", n), (None, None))
    same = sync if opts.runtime == "sync" else aio
    print(
        f"headline targets (embedded; the sidecar serves on --runtime {opts.runtime}: the "
        f"same-stack ceiling is the {stack} servicer):"
    )
    r = row(FRESH, "Check", n)
    if r and sync and aio and same:
        ratio = r.rps / same.rps
        print(
            f"target: fresh Check >= {TARGET_FRESH_RATIO:.0%} of the same-stack ceiling -> "
            f"{r.rps:,.0f}/s vs {stack} {same.rps:,.0f}/s = {ratio:.0%}: "
            f"{_met(ratio >= TARGET_FRESH_RATIO)} (vs aio {r.rps / aio.rps:.0%}, vs sync "
            f"{r.rps / sync.rps:.0%}; server CPU per call: {stack} {same.server_us:,.0f} us, "
            f"sidecar {r.server_us:,.0f} us{rounds('fresh/same')})"
        )
        print(cpu_bound(same, r, TARGET_FRESH_RATIO, stack))
        loop_us, idle_1ms, idle_10ms = in_loop_check_us(opts.duration)
        print(
            f"where a fresh Check's time goes: the handler takes {r.handler_us:,.0f} us inside "
            f"the server (its latency histogram) of the {r.server_us:,.0f} us of server CPU "
            f"per call (the {stack} servicer's whole call: {same.server_us:,.0f} us); the "
            f"same Check in one loop, no gRPC, caches hot: {loop_us:,.1f} us: in the server "
            f"it runs {r.handler_us / loop_us:.1f}x as long"
        )
        print(
            f"the same Check, no gRPC, one call after the process slept (caches cold, the "
            f"same code): after 1 ms {idle_1ms:,.1f} us ({idle_1ms / loop_us:.1f}x hot), "
            f"after 10 ms {idle_10ms:,.1f} us ({idle_10ms / loop_us:.1f}x hot)"
        )
    else:
        print("target: fresh Check: not measured in this run (--rows fresh-check)")
    if "shadow/fresh" in interleaved:
        fresh_r, shadow_r, ratios = interleaved["shadow/fresh"]
        slower = 1 - shadow_r.rps / fresh_r.rps
        print(
            f"target: Check with a shadow candidate loaded <= {TARGET_SHADOW_SLOWDOWN:.0%} "
            f"slower than without -> {shadow_r.rps:,.0f}/s vs {fresh_r.rps:,.0f}/s: "
            f"{slower:.0%} slower: {_met(slower <= TARGET_SHADOW_SLOWDOWN)} (interleaved, "
            f"{opts.rounds} alternating windows; median round "
            f"{1 - statistics.median(ratios):.0%} slower)"
        )
    from memlineage.grpc_api.server import EMBEDDED_WORKERS

    for rpc in ("Check", "FilterRank", "Check@1"):
        if f"workers/{rpc}" in interleaved:
            other_r, default_r, ratios = interleaved[f"workers/{rpc}"]
            at_one = " at one call in flight" if rpc.endswith("@1") else ""
            print(
                f"grpc_workers (embedded, reuse off): fresh {rpc.removesuffix('@1')}{at_one} "
                f"{other_r.rps:,.0f} calls/s "
                f"with {opts.other_workers} workers vs {default_r.rps:,.0f}/s with the default "
                f"{EMBEDDED_WORKERS} = {other_r.rps / default_r.rps:.2f}x (interleaved, "
                f"{len(ratios)} alternating windows, median round "
                f"{1 / statistics.median(ratios):.2f}x; server CPU per call "
                f"{other_r.server_us:,.0f} vs {default_r.server_us:,.0f} us; p50 "
                f"{other_r.pct(0.5):.2f} vs {default_r.pct(0.5):.2f} ms)"
            )
    if "stack/bare" in interleaved and "stack/fresh" in interleaved:
        bare_r, stack_r, _ = interleaved["stack/bare"]
        spin_r, fresh_r, _ = interleaved["stack/fresh"]
        print(
            f"the server around the handler (stack row, interleaved): with a Check that "
            f"spins as long as the fresh Check's handler took, the sidecar's server "
            f"{stack_r.rps:,.0f} calls/s vs the bare sync servicer spinning as long "
            f"{bare_r.rps:,.0f}/s = {stack_r.rps / bare_r.rps:.0%} (server CPU per call "
            f"{stack_r.server_us:,.0f} vs {bare_r.server_us:,.0f} us); the fresh sidecar "
            f"{fresh_r.rps:,.0f}/s vs that spinning server {spin_r.rps:,.0f}/s = "
            f"{fresh_r.rps / spin_r.rps:.0%} ({fresh_r.server_us:,.0f} vs "
            f"{spin_r.server_us:,.0f} us): what deciding costs beyond the handler's length"
        )
    if "views/fresh" in interleaved:
        cold_r, kept_r, ratios = interleaved["views/fresh"]
        print(
            f"kept views (engine/view_cache.py): fresh Check {kept_r.rps:,.0f}/s with them vs "
            f"{cold_r.rps:,.0f}/s without (keep_views = false) = {kept_r.rps / cold_r.rps:.2f}x "
            f"(interleaved, {len(ratios)} alternating windows, median round "
            f"{statistics.median(ratios):.2f}x; server CPU per call {kept_r.server_us:,.0f} us "
            f"vs {cold_r.server_us:,.0f} us; p50 {kept_r.pct(0.5):.2f} vs {cold_r.pct(0.5):.2f} ms)"
        )
    r = row(MIX, "Check", n, mix=True)
    if r and sync and aio and same:
        ratio = r.rps / same.rps
        print(
            f"target: 5%-write mix >= {TARGET_MIX_RATIO:.0%} of the same-stack ceiling -> "
            f"{r.rps:,.0f} calls/s (Check + Record) vs {stack} {same.rps:,.0f} Check "
            f"calls/s = {ratio:.0%}: {_met(ratio >= TARGET_MIX_RATIO)} (vs aio "
            f"{r.rps / aio.rps:.0%}, vs sync {r.rps / sync.rps:.0%}; Check p50 "
            f"{r.pct(0.5):.2f} ms, p99 {r.pct(0.99):.2f} ms; "
            f"server CPU per call {r.server_us:,.0f} us{rounds('mix/same')})"
        )
        print(cpu_bound(same, r, TARGET_MIX_RATIO, stack))
    else:
        print("target: 5%-write mix: not measured in this run (--rows mix)")
    r = row(FRESH, "Check", 1)
    aio1, sync1 = ceilings.get(("Check", 1), (None, None))
    same1 = sync1 if opts.runtime == "sync" else aio1
    if r and sync1 and aio1 and same1:
        factor = r.pct(0.5) / same1.pct(0.5)
        print(
            f"target: p50 at one call in flight <= {TARGET_P50_FACTOR:g}x the {stack} call "
            f"-> sidecar fresh {r.pct(0.5):.3f} ms / {stack} {same1.pct(0.5):.3f} ms = "
            f"{factor:.2f}x: {_met(factor <= TARGET_P50_FACTOR)} (p99: sidecar "
            f"{r.pct(0.99):.3f} ms, {stack} {same1.pct(0.99):.3f} ms; bare sync p50 "
            f"{sync1.pct(0.5):.3f} ms, bare aio p50 {aio1.pct(0.5):.3f} ms"
            f"{rounds('latency/same')})"
        )
    else:
        print("target: p50 at one call in flight: not measured in this run (--rows latency)")
    for spin in opts.handler_budget:  # what a handler of N us allows on the same stack
        label = f"{SYNC} + {spin:g} us handler"
        many = next((x for x in results if x.server == label and x.inflight != 1), None)
        one = next((x for x in results if x.server == label and x.inflight == 1), None)
        sync_n = ceilings.get(("Check", opts.concurrency), (None, None))[1]
        if many and one and sync_n and sync1:
            print(
                f"calibration: a bare sync handler of {spin:g} us of Python -> "
                f"{many.rps / sync_n.rps:.0%} of the sync ceiling; p50 at one call in flight "
                f"{one.pct(0.5):.3f} ms = {one.pct(0.5) / sync1.pct(0.5):.2f}x the bare sync call"
            )
    r = row(FRESH, "FilterRank", n)
    fr_aio, fr_sync = ceilings.get(("FilterRank", n), (None, None))
    if r and fr_sync and fr_aio:
        print(
            f"target: FilterRank fresh >= {TARGET_FR_DECISIONS:,} decisions/s -> "
            f"{r.decisions:,.0f}: {_met(r.decisions >= TARGET_FR_DECISIONS)} (ceilings: "
            f"bare sync {fr_sync.decisions:,.0f}, {r.rps / fr_sync.rps:.0%} of it; bare aio "
            f"{fr_aio.decisions:,.0f}, {r.rps / fr_aio.rps:.0%})"
        )
        hot, *flushed = in_loop_filter_rank_us(opts.duration)
        cold = ", ".join(
            f"after {size >> 20} MB {us:,.0f} us ({us / hot:.1f}x hot)"
            for size, us in zip(FLUSHES, flushed, strict=True)
        )
        print(
            f"where a fresh FilterRank's time goes: the handler takes {r.handler_us:,.0f} us "
            f"inside the server of the {r.server_us:,.0f} us of server CPU per call; the same "
            f"FilterRank in one loop, no gRPC, caches hot: {hot:,.0f} us (in the server it "
            f"runs {r.handler_us / hot:.1f}x as long; {TARGET_FR_DECISIONS:,} decisions/s "
            f"needs {FR_CANDIDATES / TARGET_FR_DECISIONS * 1e6:,.0f} us of server CPU per "
            f"call at one core; the hot loop plus the rest of the server CPU, the gRPC stack's "
            f"{r.server_us - r.handler_us:,.0f} us: {hot + r.server_us - r.handler_us:,.0f} us); "
            f"one call after memory was written between calls (the same code, what it touches "
            f"gone from the caches): {cold}"
        )
    else:
        print("target: FilterRank fresh: not measured in this run (--rows fresh-fr)")

    best = row(BEST, "Check", n)
    best_fr = row(BEST, "FilterRank", n)
    if not (best or best_fr):
        return
    print(
        "best case (repeated requests, no writes: decision reuse and the Check memo answer "
        "almost everything):"
    )
    if best and aio and same:
        ratio = best.rps / aio.rps
        print(
            f"target (best case): Check >= {TARGET_CHECK_RATIO:.0%} of the aio ceiling -> "
            f"{ratio:.0%}: {_met(ratio >= TARGET_CHECK_RATIO)} (server CPU per call: "
            f"ceiling {aio.server_us:,.0f} us, sidecar {best.server_us:,.0f} us; a "
            f"server-bound sidecar reaches at most {aio.server_us / best.server_us:.0%} of "
            f"the ceiling){rounds('best/aio')}"
        )
        print(
            f"same stack (best case): sidecar Check / {stack} servicer: "
            f"{best.rps / same.rps:.0%} (server CPU per call: bare {same.server_us:,.0f} us, "
            f"sidecar {best.server_us:,.0f} us){rounds('best/same')}"
        )
    if best_fr and fr_sync:
        print(
            f"target (best case): FilterRank >= {TARGET_FR_DECISIONS:,} decisions/s -> "
            f"{best_fr.decisions:,.0f}: {_met(best_fr.decisions >= TARGET_FR_DECISIONS)} "
            f"(same stack: {best_fr.rps / fr_sync.rps:.0%} of the bare sync servicer)"
        )


def _rows(text: str) -> tuple[str, ...]:
    names: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part in ROW_GROUPS:
            names += ROW_GROUPS[part]
        elif part in ROWS:
            if part == "stack":  # spins as long as the fresh Check's handler took
                names.append("fresh-check")
            names.append(part)
        else:
            raise argparse.ArgumentTypeError(
                f"unknown row {part!r}: choose from {', '.join((*ROW_GROUPS, *ROWS))}"
            )
    return tuple(dict.fromkeys(names))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds per row")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per row")
    p.add_argument("--concurrency", type=int, default=32, help="calls in flight")
    p.add_argument("--memories", type=int, default=2000)
    p.add_argument(
        "--backends",
        default="embedded,redis",
        type=lambda s: [b for b in s.split(",") if b],
        help="comma-separated: embedded, redis",
    )
    p.add_argument("--redis-url", help="use this Redis instead of a throwaway redis-server")
    p.add_argument(
        "--rows",
        type=_rows,
        default=ROWS,
        metavar="ROW,ROW",
        help="a subset of the rows: fresh-check, fresh-fr, latency (embedded), "
        "mix, best-check, best-fr, log (embedded), or the groups headline "
        "(fresh + mix), fresh (fresh-check, fresh-fr, latency), best, all "
        "(default)",
    )
    p.add_argument("--no-log-row", action="store_true", help="skip the decision-log-on row")
    p.add_argument("--profile", metavar="DIR", help="py-spy the sidecar; stacks to DIR")
    p.add_argument(
        "--native",
        action="store_true",
        help="with --profile: C frames too (pauses the server per sample)",
    )
    p.add_argument(
        "--other-workers",
        type=int,
        default=2,
        metavar="N",
        help="the workers row: a reuse-off sidecar with grpc_workers = N, measured in "
        "alternation with the default one (embedded, needs --rounds)",
    )
    p.add_argument(
        "--gil",
        action="store_true",
        help="with --profile: only the thread holding the GIL (where the Python CPU "
        "goes; a thread waiting for the GIL is not counted)",
    )
    p.add_argument(
        "--handler-budget",
        default=[],
        metavar="US,US",
        type=lambda s: [float(x) for x in s.split(",") if x],
        help="calibration rows: each ceiling's Check (aio; sync, also at 1 call in "
        "flight) spending these microseconds of Python first (e.g. 20,40,85)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=10,
        help="Check on embedded (best case against both ceilings, fresh "
        "against the sync one) also measured in this many alternating "
        "windows (0: off)",
    )
    p.add_argument(
        "--runtime",
        choices=("sync", "aio"),
        default="sync",
        help="the sidecars' --grpc-runtime; the targets' same-stack ceiling is the bare one "
        "of that runtime",
    )
    p.add_argument(
        "--server-cpus",
        default="",
        metavar="LIST",
        help="every server (sidecars and ceilings alike) on these CPUs (a taskset -c list), "
        "this client on the others: the sidecar's cpu_affinity setting",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--serve-ceiling", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--spin-us", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--sync", action="store_true", help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.serve_ceiling and opts.sync:
        serve_sync_ceiling(opts.spin_us)
        return 0
    if opts.serve_ceiling:
        asyncio.run(serve_ceiling(opts.spin_us))
        return 0
    opts.pinned = pin_servers(opts.server_cpus) if opts.server_cpus else ""
    return asyncio.run(run(opts))


if __name__ == "__main__":
    sys.exit(main())
