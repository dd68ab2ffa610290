"""The sidecar's servicer on two gRPC runtimes, side by side (prints figures, asserts
nothing; not a timed test).

The same engine and servicer (reuse off unless ``--reuse``: every decision fresh;
embedded store, bundled policies, 2,000 memories as ``grpc_bench.py`` loads them),
served two ways by this script, each in a process of its own built the same way:

- **sync**: ``grpc_api.server.serve``, what the sidecar serves with: the
  synchronous ``grpc.server`` with its ``CallPool`` workers, the services registered
  by ``grpc_api.registration`` (requests as bytes, Check and FilterRank answers as
  the servicer's bytes), health, reflection and PolicyAdmin beside them;
- **aio**: ``grpc.aio.server`` with the MemLineage service's unary methods (the
  same servicer methods, the same bytes in and out) called inline from ``async
  def`` wrappers on the event loop: no thread hand-off per call. A prototype of a
  runtime the sidecar does not have (no Watch, no token gate, no health: what
  adopting it needs is in bench/README.md), here to measure what it would give.

Neither process runs the sidecar's background loops (access flushes, the store
ping); both freeze the garbage collector's generations after loading as the
sidecar does. The two are measured in alternating windows (what else runs on the
machine weighs on both alike) with ``grpc_bench.py``'s client: Check at 32 calls
in flight, FilterRank x100 at 32, and Check at one call in flight; printed per
runtime with server and client CPU per call, then the ratio aio / sync of each
round and its median.

    .venv/bin/python bench/runtime_bench.py
    .venv/bin/python bench/runtime_bench.py --rounds 10 --window 1 --reuse
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import grpc_bench as gb  # noqa: E402


# ------------------------------------------------------------------ the served process
def _engine(reuse: bool) -> Any:
    from memlineage.engine.core import Engine
    from memlineage.engine.policies import PolicyHolder
    from memlineage.store.embedded import EmbeddedStore

    return Engine(EmbeddedStore(), PolicyHolder(str(gb.POLICIES)), reuse_decisions=reuse)


def _settled() -> None:
    """As `memlineage.sidecar.run` does once serving: long-lived objects out of the
    young generations, collections less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def serve_sync(reuse: bool) -> None:
    from memlineage.config import load_config
    from memlineage.grpc_api.server import serve
    from memlineage.metrics import Metrics

    config = load_config(env={}, overrides={"listen": "127.0.0.1:0"})
    served = serve(_engine(reuse), config, Metrics())
    _settled()
    print(f"serving on 127.0.0.1:{served.port}", file=sys.stderr, flush=True)
    served.server.wait_for_termination()


async def serve_aio(reuse: bool) -> None:
    import grpc
    from memlineage.grpc_api.auth import Authenticator
    from memlineage.grpc_api.registration import ENCODED, Caught, _as_is
    from memlineage.grpc_api.servicer import MemLineageService
    from memlineage.metrics import Metrics
    from memlineage.v1 import memlineage_pb2_grpc as pb_grpc

    service = MemLineageService(_engine(reuse), Authenticator(), Metrics())
    caught = Caught()
    pb_grpc.add_MemLineageServicer_to_server(service, caught)

    def inline(behaviour: Any) -> Any:
        async def handler(request: bytes, context: Any) -> Any:
            return behaviour(request, context)

        return handler

    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            inline(h.unary_unary),
            request_deserializer=None,
            response_serializer=_as_is if name in ENCODED else h.response_serializer,
        )
        for name, h in caught.handlers.items()
        if h.unary_unary is not None
    }
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", gb.MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", gb.MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(caught.service, handlers),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    _settled()
    print(f"serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    await server.wait_for_termination()


# ------------------------------------------------------------------ the client
def _row(name: str, rows: list[gb.Result], per_call: int = 1) -> str:
    calls = sum(r.calls for r in rows)
    seconds = sum(r.seconds for r in rows)
    lat = sorted(x for r in rows for x in r.latencies)
    return (
        f"  {name:5} {calls / seconds * per_call:>10,.0f}/s  p50 {lat[len(lat) // 2] * 1e3:6.3f} ms"
        f"  server CPU {sum(r.server_cpu for r in rows) / calls * 1e6:5.0f} us/call"
        f"  client {sum(r.client_cpu for r in rows) / calls * 1e6:4.0f} us/call"
    )


async def compare(opts: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="runtime-bench-"))
    flag = ["--reuse"] if opts.reuse else []
    here = [sys.executable, str(Path(__file__).resolve())]
    procs = {
        "sync": gb.launch([*here, "--serve", "sync", *flag], tmp / "sync.log"),
        "aio": gb.launch([*here, "--serve", "aio", *flag], tmp / "aio.log"),
    }
    try:
        workloads = {
            name: await gb.load(p.address, opts.memories, opts.seed) for name, p in procs.items()
        }
        window = argparse.Namespace(concurrency=32, warmup=0.3, duration=opts.window)
        print(
            f"runtime bench: the servicer on two gRPC runtimes, {opts.rounds} alternating "
            f"windows of {opts.window:g} s each, reuse {'on' if opts.reuse else 'off'}, "
            f"{opts.memories} memories, load average {gb._loadavg()}"
        )
        for rpc, inflight, per_call in (("Check", 32, 1), ("FilterRank", 32, 100), ("Check", 1, 1)):
            rows: dict[str, list[gb.Result]] = {name: [] for name in procs}
            for _ in range(opts.rounds):
                for name, proc in procs.items():
                    w = workloads[name]
                    requests = w.check if rpc == "Check" else w.filter_rank
                    rows[name].append(
                        await gb.measure(
                            name, "embedded", rpc, proc, requests, window, concurrency=inflight
                        )
                    )
            what = "decisions" if per_call > 1 else "calls"
            print(f"{rpc}, {inflight} in flight ({what}/s):")
            for name, rs in rows.items():
                print(_row(name, rs, per_call))
            ratios = [a.rps / s.rps for s, a in zip(rows["sync"], rows["aio"], strict=True)]
            if inflight == 1:
                p50 = [
                    statistics.median(a.latencies) / statistics.median(s.latencies)
                    for s, a in zip(rows["sync"], rows["aio"], strict=True)
                ]
                print(f"  aio / sync p50: median round {statistics.median(p50):.2f}x")
            else:
                print(
                    f"  aio / sync {what}/s: median round {statistics.median(ratios):.2f}x "
                    f"(rounds {min(ratios):.2f}-{max(ratios):.2f}x)"
                )
        print(f"load average after the run: {gb._loadavg()}")
    finally:
        for p in procs.values():
            p.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", choices=("sync", "aio"), help=argparse.SUPPRESS)
    ap.add_argument("--reuse", action="store_true", help="decision reuse on (default off)")
    ap.add_argument("--rounds", type=int, default=6, help="alternating windows per row")
    ap.add_argument("--window", type=float, default=1.0, help="seconds per window")
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    opts = ap.parse_args()
    if opts.serve == "sync":
        serve_sync(opts.reuse)
    elif opts.serve == "aio":
        asyncio.run(serve_aio(opts.reuse))
    else:
        asyncio.run(compare(opts))


if __name__ == "__main__":
    main()
