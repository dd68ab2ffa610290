"""Two sidecars measured in alternating windows with `grpc_bench.py`'s client, and the
lines that compare them: what `runtime_bench.py` (two runtimes) and
`revision_bench.py` (two revisions of the code) share.

On this shared box one window can run 1.5x as fast as the next; alternating short
windows (`grpc_bench.alternate`) makes what else runs weigh on both sides alike.
The rows: Check at 32 calls in flight, FilterRank x100 at 32, Check at one in flight.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import grpc_bench as gb

ROWS = (("Check", 32, 1), ("FilterRank", 32, 100), ("Check", 1, 1))
"""(RPC, calls in flight, decisions per call) of each compared row."""


async def windows(
    procs: dict[str, gb.ServerProcess],
    workloads: dict[str, gb.Workload],
    rpc: str,
    inflight: int,
    rounds: int,
    window: float,
) -> dict[str, list[gb.Result]]:
    """`rounds` windows of `window` seconds per sidecar (`grpc_bench.alternate`), each
    sidecar asked its own workload's requests."""
    opts = argparse.Namespace(concurrency=inflight, warmup=0.3, duration=window)
    names = list(procs)
    sides: list[gb.Side] = [
        (
            name,
            "embedded",
            procs[name],
            workloads[name].check if rpc == "Check" else workloads[name].filter_rank,
            None,
        )
        for name in names
    ]
    return dict(zip(names, await gb.alternate(sides, rpc, opts, rounds), strict=True))


def row_line(name: str, rows: list[gb.Result], per_call: int = 1) -> str:
    """One side's calls (or decisions) per second, p50, server and client CPU per call."""
    calls = sum(r.calls for r in rows)
    seconds = sum(r.seconds for r in rows)
    lat = sorted(x for r in rows for x in r.latencies)
    return (
        f"  {name:12} {calls / seconds * per_call:>10,.0f}/s"
        f"  p50 {lat[len(lat) // 2] * 1e3:6.3f} ms"
        f"  server CPU {sum(r.server_cpu for r in rows) / calls * 1e6:5.0f} us/call"
        f"  client {sum(r.client_cpu for r in rows) / calls * 1e6:4.0f} us/call"
    )


def report(
    rows: dict[str, list[gb.Result]], rpc: str, inflight: int, per_call: int, base: str, new: str
) -> None:
    """Each side's line, then `new` / `base` per round: calls/s (p50 at one in flight),
    the median round and the spread."""
    what = "decisions" if per_call > 1 else "calls"
    print(f"{rpc}, {inflight} in flight ({what}/s):")
    for name, rs in rows.items():
        print(row_line(name, rs, per_call))
    pairs = list(zip(rows[base], rows[new], strict=True))
    if inflight == 1:
        p50 = [statistics.median(n.latencies) / statistics.median(b.latencies) for b, n in pairs]
        print(
            f"  {new} / {base} p50: median round {statistics.median(p50):.2f}x "
            f"(rounds {min(p50):.2f}-{max(p50):.2f}x; above 1: {new} slower)"
        )
    else:
        ratios = [n.rps / b.rps for b, n in pairs]
        print(
            f"  {new} / {base} {what}/s: median round {statistics.median(ratios):.2f}x "
            f"(rounds {min(ratios):.2f}-{max(ratios):.2f}x)"
        )


async def compare(
    procs: dict[str, gb.ServerProcess],
    workloads: dict[str, gb.Workload],
    rounds: int,
    window: float,
    base: str,
    new: str,
) -> None:
    """Every row of `ROWS` measured (`windows`) and reported (`report`), `new` against
    `base`, then the load average after them."""
    for rpc, inflight, per_call in ROWS:
        rows = await windows(procs, workloads, rpc, inflight, rounds, window)
        report(rows, rpc, inflight, per_call, base, new)
    print(f"load average after the run: {gb._loadavg()}")
