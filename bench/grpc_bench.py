"""gRPC end-to-end benchmark on loopback: prints figures, asserts nothing (not a test).

One run, one client (grpc.aio stubs, N coroutines in flight on one channel, in
this process), the same concurrency, warm-up and duration for every row:

- the ceiling: a bare ``grpc.aio`` servicer in its own process that returns a
  constant, realistic ``CheckResponse`` (and, for FilterRank, a constant
  response with 100 ranked candidates) without looking at the request;
- the sidecar (``python -m memlineage serve``, its own process, bundled
  ``policies/``, decision log off) on the embedded store and on Redis
  (a throwaway ``redis-server`` on a free port, no persistence): ``Check`` read
  on random ids and ``FilterRank`` with 100 random candidates per call
  (decisions/s = calls/s x 100);
- ``Check`` on embedded once more with the decision log written to a file.

Each sidecar is first loaded through ``Record`` with ~2,000 memories (users,
tools, reasoning, small dependency DAGs, stale ``flight_price`` quotes, expired
tool results, untrusted and blocked sources, some roots revoked with their
descendants cascaded to pending verification).  Besides requests/s, p50/p99,
decisions/s and the ratio to the ceiling, each row has the CPU time per call of
the server process(es) and of the client (from /proc, over the measured window),
steadier than throughput on a shared machine.

    .venv/bin/python bench/grpc_bench.py                        # ~50 s
    .venv/bin/python bench/grpc_bench.py --duration 3 --concurrency 64
    .venv/bin/python bench/grpc_bench.py --backends embedded --profile /tmp/prof

``--profile DIR`` samples every sidecar with py-spy (``pip install py-spy``)
during each measured window, writes the collapsed stacks to DIR and prints the
top functions (own time and inclusive time); it perturbs the figures, so take
throughput from a run without it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
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
TARGET_CHECK_RATIO = 0.85
TARGET_FR_DECISIONS = 50_000
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
        decision_id="d19b2c3d4e5f-8a1b2c3d-1f2e3", effect=pb.EFFECT_DEGRADE,
        compliance_score=0.8, expected_cost=0.02,
        obligations=[pb.Obligation(kind="refresh", source="tool:flight_api",
                                   policy="freshest_flight_price")],
        reasons=[pb.Reason(policy="freshest_flight_price", effect=pb.EFFECT_DEGRADE,
                           message="always use the freshest flight price", priority=10,
                           status="fired")],
        operation=pb.OPERATION_READ, memory_ids=[memory_id], decided_at=_ts(time.time()),
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
            c = self.filter_rank.candidates.add(memory_id=mid, similarity=0.5, rank_score=0.4,
                                                kept=True)
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


async def serve_ceiling(spin_us: float = 0.0) -> None:
    server = grpc.aio.server(options=SERVER_OPTIONS)
    pb_grpc.add_MemLineageServicer_to_server(CeilingServicer(spin_us), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"ceiling serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    await server.wait_for_termination()


class SyncCeilingServicer(pb_grpc.MemLineageServicer):
    """The same constant answers, for the synchronous server."""

    def __init__(self) -> None:
        self.answers = CeilingServicer()

    def Check(self, request, context):
        return self.answers.check

    def FilterRank(self, request, context):
        return self.answers.filter_rank


def serve_sync_ceiling() -> None:
    """The second ceiling: a bare servicer on the stack the sidecar serves with (the
    synchronous gRPC server, as many worker threads as the sidecar on embedded)."""
    from concurrent.futures import ThreadPoolExecutor

    from memlineage.grpc_api.server import EMBEDDED_WORKERS

    server = grpc.server(ThreadPoolExecutor(max_workers=EMBEDDED_WORKERS),
                         options=SERVER_OPTIONS)
    pb_grpc.add_MemLineageServicer_to_server(SyncCeilingServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"ceiling serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    server.wait_for_termination()


# ------------------------------------------------------------------ server processes
READY = re.compile(r"serving on 127\.0\.0\.1:(\d+)")


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

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


def launch(args: list[str], log: Path) -> ServerProcess:
    """Start a server process; its stderr goes to `log`, where it announces its port."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=fh, cwd=REPO)
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
    return launch([sys.executable, str(Path(__file__).resolve()), "--serve-ceiling",
                   "--spin-us", str(spin_us), *(["--sync"] if sync else [])],
                  tmp / f"ceiling-{spin_us:g}{'-sync' if sync else ''}.log")


def launch_sidecar(tmp: Path, store: str, decision_log: str, label: str) -> ServerProcess:
    return launch([sys.executable, "-m", "memlineage", "serve", "--listen", "127.0.0.1:0",
                   "--store", store, "--policies", str(POLICIES),
                   "--decision-log", decision_log], tmp / f"{label}.log")


# ------------------------------------------------------------------ the workload
@dataclass
class Workload:
    ids: list[str]
    check: list[pb.CheckRequest]
    filter_rank: list[pb.FilterRankRequest]
    effects: Counter[str]


def memories(n: int, now: float, rng: random.Random) -> list[list[pb.Memory]]:
    """~n memories in dependency layers (each layer only depends on earlier ones)."""
    roots: list[pb.Memory] = []
    n_roots = int(n * 0.6)
    for i in range(n_roots):
        mid = f"m:{i:06d}"
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
    earlier = [m.id for m in roots]
    per_layer = (n - n_roots) // 2
    for depth in (1, 2):
        layer = []
        for j in range(per_layer):
            m = pb.Memory(id=f"m:d{depth}:{j:06d}", type="plan", context_id=f"ctx:{j % 50:03d}")
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


async def load(address: str, n: int, seed: int) -> Workload:
    """Record the memories through the sidecar, revoke some roots, build the requests."""
    rng = random.Random(seed)
    now = time.time()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.MemLineageStub(channel)
        recorded: list[str] = []
        layers = memories(n, now, rng)
        for layer in layers:
            results = await bounded(16, stub.Record,
                                    [pb.RecordRequest(memory=m) for m in layer])
            recorded += [r.memory.id for r in results if r.recorded]
        by_id = {m.id: m for m in layers[0]}
        revoke = rng.sample(sorted(set(recorded) & set(by_id)), len(layers[0]) // 30)
        for mid in revoke:
            creator = by_id[mid].creator
            await stub.UpdateStatus(pb.UpdateStatusRequest(
                memory_id=mid, action=pb.STATUS_ACTION_REVOKE, reason="bench: withdrawn",
                actor=pb.Actor(kind=creator.kind, id=creator.id)))
        checks = [pb.CheckRequest(operation=pb.OPERATION_READ, memory_id=rng.choice(recorded))
                  for _ in range(20_000)]
        frs = []
        for _ in range(300):
            req = pb.FilterRankRequest()
            for mid in rng.sample(recorded, FR_CANDIDATES):
                req.candidates.add(memory_id=mid, similarity=rng.uniform(0.3, 1.0))
            frs.append(req)
        sample = await bounded(16, stub.Check, checks[:500])
    effects = Counter(pb.Effect.Name(r.decision.effect).removeprefix("EFFECT_").lower()
                      for r in sample)
    return Workload(recorded, checks, frs, effects)


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

    def pct(self, q: float) -> float:
        lat = sorted(self.latencies)
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


async def drive(address: str, rpc: str, requests: list, *, concurrency: int, warmup: float,
                duration: float, pids: list[int]) -> tuple[int, list[float], int, float, float]:
    """`concurrency` coroutines, each one call in flight; only completions inside the
    measured window count (their latency is from send to answer). Also the CPU time the
    server processes (`pids`) and this client process spent during the window."""
    async with grpc.aio.insecure_channel(address, options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]) as channel:
        await channel.channel_ready()
        call = getattr(pb_grpc.MemLineageStub(channel), rpc)
        loop = asyncio.get_running_loop()
        start = loop.time()
        t_from, t_to = start + warmup, start + warmup + duration
        latencies: list[float] = []
        errors = 0
        n = len(requests)
        cpu: dict[str, tuple[float, float]] = {}

        def snapshot(name: str) -> None:
            cpu[name] = (cpu_seconds(pids), time.process_time())

        loop.call_at(t_from, snapshot, "from")
        loop.call_at(t_to, snapshot, "to")

        async def worker(k: int) -> None:
            nonlocal errors
            i = k * 7919
            clock = time.perf_counter
            while True:
                t0 = clock()
                if loop.time() >= t_to:
                    return
                try:
                    await call(requests[i % n])
                except grpc.aio.AioRpcError:
                    errors += 1
                t1 = clock()
                now = loop.time()
                if t_from <= now < t_to:
                    latencies.append(t1 - t0)
                i += 1

        await asyncio.gather(*(worker(k) for k in range(concurrency)))
    (s0, c0), (s1, c1) = cpu["from"], cpu["to"]
    return len(latencies), latencies, errors, s1 - s0, c1 - c0


async def measure(server: str, store: str, rpc: str, proc: ServerProcess, requests: list,
                  opts: argparse.Namespace, profiler: Profiler | None = None,
                  extra_pids: tuple[int, ...] = ()) -> Result:
    per_call = FR_CANDIDATES if rpc == "FilterRank" else 1
    sampler = None
    if profiler is not None:
        sampler = profiler.start(f"{server}-{store}-{rpc}", proc, opts.warmup, opts.duration)
    calls, lat, errors, server_cpu, client_cpu = await drive(
        proc.address, rpc, requests, concurrency=opts.concurrency, warmup=opts.warmup,
        duration=opts.duration, pids=[proc.proc.pid, *extra_pids])
    if sampler is not None:
        profiler.finish(sampler)
    return Result(server, store, rpc, calls, opts.duration, lat, errors, per_call, server_cpu,
                  client_cpu)


async def paired(ceiling: ServerProcess, sidecar: ServerProcess, rpc: str, requests: list,
                 opts: argparse.Namespace, label: str = "ceiling (bare aio)",
                 ) -> tuple[Result, Result, list[float]]:
    """The ceiling and the sidecar measured in alternation, `opts.rounds` short windows
    each (the same total time as one row): what else runs on the machine weighs on
    both alike. Returns the summed results and the ratio of each round."""
    short = argparse.Namespace(**{**vars(opts), "duration": opts.duration / opts.rounds,
                                  "warmup": 0.3})
    pairs = []
    for _ in range(opts.rounds):
        pairs.append((await measure(label, "-", rpc, ceiling, requests, short),
                      await measure("sidecar", "embedded", rpc, sidecar, requests, short)))

    def total(rows: list[Result]) -> Result:
        first = rows[0]
        return Result(first.server, first.store, rpc, sum(r.calls for r in rows),
                      sum(r.seconds for r in rows), [x for r in rows for x in r.latencies],
                      sum(r.errors for r in rows), first.per_call,
                      sum(r.server_cpu for r in rows), sum(r.client_cpu for r in rows))

    return (total([c for c, _ in pairs]), total([s for _, s in pairs]),
            [s.rps / c.rps for c, s in pairs])


# ------------------------------------------------------------------ profiling (py-spy)
class Profiler:
    """py-spy record on a running sidecar for the measured window, collapsed stacks out.

    Python frames only and non-blocking by default (little perturbation); with
    `native`, C frames too (GC, syscalls, cygrpc), but py-spy then pauses the
    server for every sample, which costs it a good part of its throughput."""

    def __init__(self, out: Path, native: bool = False) -> None:
        self.out = out
        self.native = native
        out.mkdir(parents=True, exist_ok=True)
        exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which(
            "py-spy")
        if exe is None:
            raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
        self.exe = exe
        self.reports: list[str] = []

    def start(self, label: str, proc: ServerProcess, warmup: float, duration: float):
        path = self.out / f"{label}.txt"
        path.unlink(missing_ok=True)
        cmd = [self.exe, "record", "--pid", str(proc.proc.pid), "--format", "raw",
               "--duration", str(max(1, int(duration))), "--output", str(path)]
        cmd += ["--native", "--rate", "100"] if self.native else ["--nonblocking",
                                                                   "--rate", "250"]
        return label, path, subprocess.Popen(
            ["sh", "-c", f'sleep {warmup} && exec "$@"', "sh", *cmd],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

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
ROOTS = ("<module> (", "main (memlineage/cli", "_serve (", "_run_module_as_main",
         "_run_code (", "run (asyncio", "Runner.run", "BaseEventLoop.run_")


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
        if any(w in leaf for w in ("select (", "poll (", "wait (", "epoll_wait", "_worker (",
                                   "pthread_cond")) or (
                frames[0].startswith("Thread._bootstrap") and len(frames) <= 3):
            idle += n
            continue
        total += n
        own[leaf] += n
        layers[_layer(frames)] += n
        for f in set(frames):
            incl[f] += n
    if not total:
        return f"{label}: no busy samples"
    out = [f"--- profile {label}: {total} busy samples ({idle} idle) ---",
           "  by layer (innermost project frame of each sample)"]
    out += [f"    {100 * c / total:5.1f}%  {k}" for k, c in layers.most_common()]
    out.append("  own time (leaf frame)")
    out += [f"    {100 * c / total:5.1f}%  {f}" for f, c in own.most_common(top)]
    out.append("  inclusive time (project frames)")
    mine = [(f, c) for f, c in incl.most_common()
            if "memlineage" in f and not f.startswith(ROOTS)]
    out += [f"    {100 * c / total:5.1f}%  {f}" for f, c in mine[:top + 6]]
    return "\n".join(out)


# ------------------------------------------------------------------ the run
RPC_ORDER = ("Check", "FilterRank")


def table(results: list[Result], ceilings: dict[str, Result]) -> str:
    head = (f"{'server':<24} {'store':<9} {'RPC':<11} {'requests/s':>10} {'p50 ms':>7} "
            f"{'p99 ms':>7} {'decisions/s':>11} {'vs ceiling':>10} {'srv CPU us':>10} "
            f"{'cli CPU us':>10} {'errors':>6}")
    rows = [head, "-" * len(head)]
    for rpc in RPC_ORDER:
        first = ceilings.get(rpc)
        for r in sorted((r for r in results if r.rpc == rpc), key=lambda r: r is not first):
            ceiling = ceilings.get(r.rpc)
            ratio = f"{r.rps / ceiling.rps:.0%}" if ceiling and r is not ceiling else "-"
            rows.append(f"{r.server:<24} {r.store:<9} {r.rpc:<11} {r.rps:>10,.0f} "
                        f"{r.pct(0.5):>7.2f} {r.pct(0.99):>7.2f} {r.decisions:>11,.0f} "
                        f"{ratio:>10} {r.server_us:>10,.0f} {r.client_us:>10,.0f} "
                        f"{r.errors:>6}")
    rows.append("srv CPU us / cli CPU us: CPU time of the server process(es) / of the client "
                "per call in the window (redis rows: sidecar + redis-server)")
    return "\n".join(rows)


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


async def run(opts: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="grpc-bench-"))
    profiler = Profiler(Path(opts.profile), opts.native) if opts.profile else None
    results: list[Result] = []
    ceilings: dict[str, Result] = {}
    notes: list[str] = []
    redis_server = None
    ceiling = sync_ceiling = None
    same_stack: dict[str, Result] = {}
    interleaved: tuple[Result, Result, list[float]] | None = None
    interleaved_sync: tuple[Result, Result, list[float]] | None = None
    print(f"gRPC bench on loopback, a SHARED {os.cpu_count()}-core box (other jobs run beside "
          f"it: figures are indicative, compare rows of one run), load average {_loadavg()}")
    print(f"Python {sys.version.split()[0]}, grpcio {grpc.__version__}; client: this process, "
          f"grpc.aio, 1 channel, {opts.concurrency} calls in flight; each server in its own "
          f"process")
    print(f"per row: warm-up {opts.warmup:g} s, measured {opts.duration:g} s; FilterRank: "
          f"{FR_CANDIDATES} candidates per call (decisions/s = calls/s x {FR_CANDIDATES}); "
          f"sidecar: bundled policies/, record_access on, decision log off unless stated")
    plan: list[tuple[str, str, str]] = []
    for backend in opts.backends:
        plan.append((backend, "off", "sidecar"))
        if backend == "embedded" and not opts.no_log_row:
            plan.append((backend, str(tmp / "decisions.jsonl"), "sidecar+decision-log"))
    try:
        ceiling = launch_ceiling(tmp)
        sync_ceiling = launch_ceiling(tmp, sync=True)
        for backend, decision_log, name in plan:
            store_url = "embedded"
            if backend == "redis":
                if opts.redis_url:
                    store_url = opts.redis_url
                else:
                    if redis_server is None:
                        from support.redis_servers import start_redis_server

                        redis_server = start_redis_server(tmp / "redis", aof=False)
                    store_url = redis_server.url
            sidecar = launch_sidecar(tmp, store_url, decision_log, f"{name}-{backend}")
            try:
                t0 = time.perf_counter()
                workload = await load(sidecar.address, opts.memories, opts.seed)
                if name == "sidecar":
                    mix = ", ".join(f"{k} {v / sum(workload.effects.values()):.0%}"
                                    for k, v in sorted(workload.effects.items()))
                    notes.append(f"{backend}: recorded {len(workload.ids)} memories through "
                                 f"Record in {time.perf_counter() - t0:.1f} s; Check read "
                                 f"effects: {mix}")
                rpcs = [("Check", workload.check)]
                if name == "sidecar":
                    rpcs.append(("FilterRank", workload.filter_rank))
                for rpc, reqs in rpcs:
                    if rpc not in ceilings:  # measured right before the first sidecar row
                        ceilings[rpc] = await measure("ceiling (bare aio)", "-", rpc,
                                                      ceiling, reqs, opts)
                        results.append(ceilings[rpc])
                        same_stack[rpc] = await measure("ceiling (bare sync)", "-", rpc,
                                                        sync_ceiling, reqs, opts)
                        results.append(same_stack[rpc])
                    extra = (redis_server.proc.pid,) if (
                        backend == "redis" and redis_server and redis_server.proc) else ()
                    results.append(await measure(name, backend, rpc, sidecar, reqs, opts,
                                                 profiler, extra))
                if name == "sidecar" and backend == "embedded" and opts.rounds:
                    c, sc, ratios = await paired(ceiling, sidecar, "Check", workload.check,
                                                 opts)
                    interleaved = (c, sc, ratios)
                    interleaved_sync = await paired(
                        sync_ceiling, sidecar, "Check", workload.check, opts,
                        "ceiling (bare sync)")
                if name == "sidecar" and backend == opts.backends[0]:
                    for spin in opts.handler_budget:  # calibration: ceiling + N us of Python
                        spinner = launch_ceiling(tmp, spin)
                        try:
                            results.append(await measure(f"ceiling + {spin:g} us handler", "-",
                                                         "Check", spinner, workload.check,
                                                         opts))
                        finally:
                            spinner.stop()
                if decision_log != "off":
                    text = Path(decision_log).read_text()
                    lines, size = text.count("\n"), len(text.encode())
                    notes.append(f"decision log: {lines:,} JSON lines, {size / 1e6:.1f} MB "
                                 f"({size / max(lines, 1):.0f} B per decision)")
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
    for r in results:
        if r.server != "sidecar" or r.store != "embedded":
            continue
        if r.rpc == "Check":
            c = ceilings["Check"]
            ratio = r.rps / c.rps
            print(f"target: Check >= {TARGET_CHECK_RATIO:.0%} of the ceiling -> {ratio:.0%}: "
                  f"{'met' if ratio >= TARGET_CHECK_RATIO else 'MISSED'} (server CPU per call: "
                  f"ceiling {c.server_us:,.0f} us, sidecar {r.server_us:,.0f} us; a server-bound "
                  f"sidecar reaches at most {c.server_us / r.server_us:.0%} of the ceiling)")
        else:
            print(f"target: FilterRank >= {TARGET_FR_DECISIONS:,} decisions/s on embedded -> "
                  f"{r.decisions:,.0f}: "
                  f"{'met' if r.decisions >= TARGET_FR_DECISIONS else 'MISSED'}")
    if interleaved is not None:
        c, sc, ratios = interleaved
        ratio = sc.rps / c.rps
        print(f"target: Check >= {TARGET_CHECK_RATIO:.0%} of the ceiling, interleaved "
              f"({opts.rounds} alternating windows of {opts.duration / opts.rounds:g} s each): "
              f"ceiling {c.rps:,.0f}/s, sidecar {sc.rps:,.0f}/s -> {ratio:.0%}: "
              f"{'met' if ratio >= TARGET_CHECK_RATIO else 'MISSED'} (median round "
              f"{statistics.median(ratios):.0%}, rounds {min(ratios):.0%}-{max(ratios):.0%}; "
              f"server CPU per call: ceiling {c.server_us:,.0f} us, sidecar "
              f"{sc.server_us:,.0f} us; client: {c.client_us:,.0f} us, {sc.client_us:,.0f} us)")
    # The sidecar serves on the synchronous gRPC server, cheaper per call than grpc.aio
    # here: against a bare servicer on that same stack, what the sidecar itself costs.
    for r in results:
        if r.server == "sidecar" and r.store == "embedded" and r.rpc in same_stack:
            c = same_stack[r.rpc]
            print(f"same stack: sidecar {r.rpc} / bare sync servicer: {r.rps / c.rps:.0%} "
                  f"(server CPU per call: bare {c.server_us:,.0f} us, sidecar "
                  f"{r.server_us:,.0f} us)")
    if interleaved_sync is not None:
        c, sc, ratios = interleaved_sync
        print(f"same stack, interleaved: sidecar Check / bare sync servicer: "
              f"{sc.rps / c.rps:.0%} (median round {statistics.median(ratios):.0%}, rounds "
              f"{min(ratios):.0%}-{max(ratios):.0%})")
    if profiler is not None:
        print()
        print("(profiled run: py-spy sampled the sidecar during each measured window; "
              "throughput above is perturbed)")
        for rep in profiler.reports:
            print(rep)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds per row")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per row")
    p.add_argument("--concurrency", type=int, default=32, help="calls in flight")
    p.add_argument("--memories", type=int, default=2000)
    p.add_argument("--backends", default="embedded,redis",
                   type=lambda s: [b for b in s.split(",") if b],
                   help="comma-separated: embedded, redis")
    p.add_argument("--redis-url", help="use this Redis instead of a throwaway redis-server")
    p.add_argument("--no-log-row", action="store_true", help="skip the decision-log-on row")
    p.add_argument("--profile", metavar="DIR", help="py-spy the sidecar; stacks to DIR")
    p.add_argument("--native", action="store_true",
                   help="with --profile: C frames too (pauses the server per sample)")
    p.add_argument("--handler-budget", default=[], metavar="US,US",
                   type=lambda s: [float(x) for x in s.split(",") if x],
                   help="calibration rows: the ceiling's Check spending these microseconds "
                        "of Python first (e.g. 5,10,20)")
    p.add_argument("--rounds", type=int, default=10,
                   help="Check on embedded also measured against the ceiling in this many "
                        "alternating windows (0: off)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--serve-ceiling", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--spin-us", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--sync", action="store_true", help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.serve_ceiling and opts.sync:
        serve_sync_ceiling()
        return 0
    if opts.serve_ceiling:
        asyncio.run(serve_ceiling(opts.spin_us))
        return 0
    return asyncio.run(run(opts))


if __name__ == "__main__":
    sys.exit(main())
