"""The sidecar on its two gRPC runtimes, side by side (prints figures, asserts
nothing; not a timed test).

Two sidecars, `memlineage serve --grpc-runtime sync` and `--grpc-runtime aio`, each
in a process of its own, started alike (embedded store, bundled policies, reuse off
unless ``--reuse``: every decision fresh; decision log off; metrics on, as
``grpc_bench.py`` starts them), each loaded with ``grpc_bench.py``'s 2,000
memories. They are measured in alternating windows (what else runs on the machine
weighs on both alike) with ``grpc_bench.py``'s client: Check at 32 calls in flight,
FilterRank x100 at 32, and Check at one call in flight; printed per runtime with
server and client CPU per call, then the ratio aio / sync of each round and its
median. The figure to set the default `grpc_runtime` by.

    .venv/bin/python bench/runtime_bench.py
    .venv/bin/python bench/runtime_bench.py --rounds 10 --window 1 --reuse
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import grpc_bench as gb  # noqa: E402

REUSE_OFF = "# runtime_bench: every decision fresh\nreuse_decisions = false\n"


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
    config = None
    if not opts.reuse:
        config = tmp / "reuse-off.toml"
        config.write_text(REUSE_OFF)
    procs = {
        name: gb.launch_sidecar(tmp, "embedded", "off", f"sidecar-{name}", config, name)
        for name in ("sync", "aio")
    }
    try:
        workloads = {
            name: await gb.load(p.address, opts.memories, opts.seed) for name, p in procs.items()
        }
        window = argparse.Namespace(concurrency=32, warmup=0.3, duration=opts.window)
        print(
            f"runtime bench: the sidecar on its two gRPC runtimes, {opts.rounds} alternating "
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
    ap.add_argument("--reuse", action="store_true", help="decision reuse on (default off)")
    ap.add_argument("--rounds", type=int, default=6, help="alternating windows per row")
    ap.add_argument("--window", type=float, default=1.0, help="seconds per window")
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    asyncio.run(compare(ap.parse_args()))


if __name__ == "__main__":
    main()
